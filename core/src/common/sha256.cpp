// SHA-256 through OpenSSL's libcrypto (EVP): its assembly kernels use the CPU's SHA extensions
// or AVX2 where there are, several times the speed of a portable C++ loop (docs/benchmarks.md).
#include "oml/common/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

#include "oml/common/error.h"

namespace oml {

namespace {

constexpr std::size_t kReadBlock = std::size_t{1} << 20;

struct DigestContextFree {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};

// Lowercase hex of `n` bytes.
std::string hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

// An incremental SHA-256. libcrypto fails only without memory or with a broken provider
// configuration (OPENSSL_CONF): a RuntimeError saying which call.
class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new()) {
    OML_CHECK(context_ != nullptr, RuntimeError, "SHA-256: OpenSSL's EVP_MD_CTX_new failed");
    OML_CHECK(EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) == 1, RuntimeError,
              "SHA-256: OpenSSL's EVP_DigestInit_ex failed (is libcrypto's default provider available?)");
  }

  void update(const void* data, std::size_t n) {
    OML_CHECK(EVP_DigestUpdate(context_.get(), data, n) == 1, RuntimeError,
              "SHA-256: OpenSSL's EVP_DigestUpdate failed");
  }

  std::string hex_digest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    OML_CHECK(EVP_DigestFinal_ex(context_.get(), digest, &length) == 1, RuntimeError,
              "SHA-256: OpenSSL's EVP_DigestFinal_ex failed");
    return hex(digest, length);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, DigestContextFree> context_;
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  OML_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1, RuntimeError,
            "SHA-256: OpenSSL's EVP_Digest failed");
  return hex(digest, length);
}

std::string sha256_file_hex(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw RuntimeError("cannot read " + file.string() + " to hash it");
  Sha256 hash;
  std::vector<char> buffer(kReadBlock);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw RuntimeError("cannot read " + file.string() + " to hash it");
  return hash.hex_digest();
}

}  // namespace oml
