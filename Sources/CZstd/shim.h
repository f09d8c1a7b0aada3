#ifndef WEFT_CZSTD_SHIM_H
#define WEFT_CZSTD_SHIM_H
#include <zstd.h>
#endif
