/* Built twice: as an instrumented and as a plain shared library. */
long SUM(const long *v, long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += v[i];
    return s;
}
