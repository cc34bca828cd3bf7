// SHA-2 and Ed25519 through OpenSSL's libcrypto (Debian libssl-dev): the
// EVP interfaces, which pick SHA-NI or AVX2 code at run time.
#include <openssl/evp.h>
#include <openssl/rand.h>

// EVP_PKEY_ED25519 is a macro of a macro, which Swift does not import.
static inline int trove_evp_pkey_ed25519(void) { return EVP_PKEY_ED25519; }

// MD4 for the block hashes of zsync control files, which name it; OpenSSL 3
// offers it through EVP only with the legacy provider loaded, but keeps the
// one-shot function (deprecated, hence the wrapper).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/md4.h>
static inline void trove_md4(const void *bytes, size_t count, unsigned char *out) {
  MD4((const unsigned char *)bytes, count, out);
}
