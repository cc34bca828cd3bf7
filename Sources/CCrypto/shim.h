// SHA-2 and Ed25519 through OpenSSL's libcrypto (Debian libssl-dev): the
// EVP interfaces, which pick SHA-NI or AVX2 code at run time.
#include <openssl/evp.h>
#include <openssl/rand.h>

// EVP_PKEY_ED25519 is a macro of a macro, which Swift does not import.
static inline int trove_evp_pkey_ed25519(void) { return EVP_PKEY_ED25519; }
