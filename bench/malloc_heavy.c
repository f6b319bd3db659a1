/* The malloc-heavy benchmark of issue 2: millions of small malloc/free pairs, then
 * a linked list built and walked. Pointers escape through `sink` so the compiler
 * cannot elide the allocations. */
#include <stdio.h>
#include <stdlib.h>

struct node {
    struct node *next;
    long value;
};

void *volatile sink;

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 10000000;
    long nodes = argc > 2 ? atol(argv[2]) : 2000000;
    unsigned x = 12345;
    for (long i = 0; i < pairs; i++) {
        x = x * 1103515245u + 12345u;
        char *p = malloc(16 + (x >> 16) % 240);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
    struct node *head = NULL;
    for (long i = 0; i < nodes; i++) {
        struct node *n = malloc(sizeof *n);
        n->value = i;
        n->next = head;
        head = n;
    }
    long sum = 0;
    for (int pass = 0; pass < 5; pass++)
        for (struct node *n = head; n; n = n->next) sum += n->value;
    while (head) {
        struct node *next = head->next;
        free(head);
        head = next;
    }
    printf("%ld\n", sum);
    return 0;
}
