/* C shims for the Fortran module: they go through memlens.h's weak-symbol checks,
 * so a Fortran program linked with this file runs unchanged without memlens. */
#include "memlens.h"

void memlens_f_region_begin(const char *name) { memlens_region_begin(name); }
void memlens_f_region_end(const char *name) { memlens_region_end(name); }
void memlens_f_tag(const char *name, const void *start, size_t len) { memlens_tag(name, start, len); }
void memlens_f_untag(const void *start) { memlens_untag(start); }
void memlens_f_group_begin(const char *name) { memlens_group_begin(name); }
void memlens_f_group_end(void) { memlens_group_end(); }
