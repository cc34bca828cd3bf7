// SHA-2 through OpenSSL's libcrypto (Debian libssl-dev): the EVP digest
// interface, which picks SHA-NI or AVX2 code at run time.
#include <openssl/evp.h>
