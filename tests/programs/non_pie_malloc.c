/* Allocates through a pointer to malloc. Built as a non-PIE executable it
   has its own canonical PLT entry for malloc (an undefined symbol with an
   address, so that function pointers compare equal), which is what
   dlsym(RTLD_DEFAULT, "malloc") returns, though its calls reach the first
   definition loaded after it. 100 blocks of 1000 bytes, 50 of them freed. */
#include <stdio.h>
#include <stdlib.h>

void *(*volatile allocate)(size_t);

int main(void) {
    static char *kept[100];
    allocate = malloc; /* in code: an absolute address, the PLT entry's */
    for (int i = 0; i < 100; i++) {
        kept[i] = allocate(1000);
        kept[i][0] = (char)i;
    }
    for (int i = 0; i < 50; i++)
        free(kept[i]);
    printf("%d\n", kept[99][0]);
    return 0;
}
