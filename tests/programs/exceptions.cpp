// C++ exceptions and new/delete under the runtime.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// Keeps the compiler from eliding the allocations.
int *volatile keep;

static int thrower(int i) {
    std::vector<int> local(100000, i);  // unwound by the exception
    keep = local.data();
    if (i % 2) throw std::runtime_error("odd " + std::to_string(i));
    return local[0];
}

int main() {
    int caught = 0;
    long sum = 0;
    for (int i = 0; i < 2000; i++) {
        try {
            sum += thrower(i);
        } catch (const std::exception &e) {
            caught++;
        }
    }
    std::vector<std::unique_ptr<std::string>> v;
    for (int i = 0; i < 10000; i++) v.push_back(std::make_unique<std::string>(100, 'x'));
    std::printf("caught=%d sum=%ld strings=%zu\n", caught, sum, v.size());
    return 0;
}
