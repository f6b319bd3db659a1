/* Allocates 5 blocks of 100000 bytes through stripped_lib.c. */
void *exported_entry(int n);
int main(void) { for (int i = 0; i < 5; i++) exported_entry(100000); return 0; }
