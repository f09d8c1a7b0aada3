#ifndef WEFT_CFILECOPY_SHIM_H
#define WEFT_CFILECOPY_SHIM_H
#include <sys/types.h>

// glibc 2.27 and later (Linux 4.5): copies between two files inside the kernel. Declared here
// because Swift's Glibc module does not show it (it needs _GNU_SOURCE); the signature is glibc's.
extern ssize_t copy_file_range(int in_fd, off_t *in_off, int out_fd, off_t *out_off, size_t len, unsigned int flags);

static inline ssize_t weft_copy_file_range(int input, off_t *inputOffset, int output, off_t *outputOffset, size_t count) {
    return copy_file_range(input, inputOffset, output, outputOffset, count, 0);
}
#endif
