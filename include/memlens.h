/*
 * memlens.h: annotations for the memlens profiler (C and C++).
 *
 * Include it and call the functions below. Without memlens the program builds,
 * links and runs unchanged: each call is a weak-symbol test that costs one load and
 * one compare, and does nothing. Under `memlens record` (or LD_PRELOAD of
 * libmemlens_runtime.so) the runtime provides the symbols and records the events.
 *
 *   memlens_region_begin("solve");  ...  memlens_region_end("solve");
 *   memlens_phase_begin("assemble");  ... parallel code ...  memlens_phase_end("assemble");
 *   memlens_tag("grid", grid, n * sizeof *grid);
 *   memlens_group_begin("tree nodes");  ... many small mallocs ...  memlens_group_end();
 */
#ifndef MEMLENS_H
#define MEMLENS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Named regions: per thread, nestable; end names the region it closes. */
void memlens_region_begin(const char *name) __attribute__((weak));
void memlens_region_end(const char *name) __attribute__((weak));
/* Named phases of the whole process (NMO's nmo_start/nmo_stop): every thread's
 * accesses count between the marks, whichever thread makes them; nestable. */
void memlens_phase_begin(const char *name) __attribute__((weak));
void memlens_phase_end(const char *name) __attribute__((weak));
/* Name the address range [start, start + len) as a data object until untagged. */
void memlens_tag(const char *name, const void *start, size_t len) __attribute__((weak));
void memlens_untag(const void *start) __attribute__((weak));
/* Every allocation this thread makes until memlens_group_end, whatever its size,
 * belongs to one synthetic object called name (Extrae's grouping API). */
void memlens_group_begin(const char *name) __attribute__((weak));
void memlens_group_end(void) __attribute__((weak));
/* 1 when the runtime is loaded and recording. */
int memlens_active(void) __attribute__((weak));

/* A function-like macro is not expanded again inside itself, so the inner name is
 * the real (weak) function: callers write plain memlens_region_begin("x"). */
#define memlens_region_begin(name) (memlens_region_begin ? memlens_region_begin(name) : (void)0)
#define memlens_region_end(name) (memlens_region_end ? memlens_region_end(name) : (void)0)
#define memlens_phase_begin(name) (memlens_phase_begin ? memlens_phase_begin(name) : (void)0)
#define memlens_phase_end(name) (memlens_phase_end ? memlens_phase_end(name) : (void)0)
#define memlens_tag(name, start, len) (memlens_tag ? memlens_tag(name, start, len) : (void)0)
#define memlens_untag(start) (memlens_untag ? memlens_untag(start) : (void)0)
#define memlens_group_begin(name) (memlens_group_begin ? memlens_group_begin(name) : (void)0)
#define memlens_group_end() (memlens_group_end ? memlens_group_end() : (void)0)
#define memlens_active() (memlens_active ? memlens_active() : 0)

#ifdef __cplusplus
}
#endif

#endif /* MEMLENS_H */
