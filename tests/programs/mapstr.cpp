// One function fills a map whose keys are long strings: the map's nodes
// and the keys' characters are two allocation sites inside it, told apart
// only by the standard library's frames below it.
#include <cstdio>
#include <map>
#include <string>

static std::map<std::string, long> build(int n) {
    std::map<std::string, long> m;
    for (int i = 0; i < n; i++)
        m[std::string(40, char('a' + i % 26)) + std::to_string(i)] = i;
    return m;
}

int main() {
    std::map<std::string, long> m = build(100000);
    std::printf("%zu\n", m.size());
    return 0;
}
