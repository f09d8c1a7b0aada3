#ifndef WEFT_CSPAWN_SHIM_H
#define WEFT_CSPAWN_SHIM_H
#include <spawn.h>

// glibc 2.34 and later: close every descriptor from `from` up in the child. Declared here
// because Swift's Glibc module does not show it; the signature is glibc's.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

static inline int weft_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
#endif
