#ifndef WEFT_CLIBCRYPTO_SHIM_H
#define WEFT_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/err.h>
#endif
