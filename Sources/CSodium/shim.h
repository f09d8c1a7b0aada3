#ifndef WEFT_CSODIUM_SHIM_H
#define WEFT_CSODIUM_SHIM_H
#include <sodium.h>
#endif
