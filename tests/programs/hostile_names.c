// Names that would drive a terminal or break a table or an XML file if
// printed raw: given through the annotation API and as a symbol's name.
#include <memlens.h>
#include <stdlib.h>
#include <string.h>

#define RETITLE "\x1b]0;retitled\x07"
#define RED "\x1b[31m"

// A function whose symbol holds ESC and a right-to-left override.
void *hostile_alloc(size_t n) __asm__("alloc\x1b[2J\xe2\x80\xae" "evil");
__attribute__((noinline)) void *hostile_alloc(size_t n) {
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

int main(void) {
    memlens_region_begin("region" RETITLE RED);
    memlens_group_begin("group\x1b[2J\r\n\x7f");
    char *kept = hostile_alloc(1 << 20);
    memlens_group_end();
    static char buffer[1 << 16];
    memlens_tag("tag" RETITLE "\xc2\x9b" "1m\xff", buffer, sizeof buffer);
    memset(buffer, 2, sizeof buffer);
    char *leaked = hostile_alloc(4096);
    memlens_region_end("region" RETITLE RED);
    free(kept);
    return leaked[0] == 1 ? 0 : 1;
}
