// SHA-256 (FIPS 180-4), Ember's own: the code cache names every artifact by the digest of what
// produced it, so the digest must be the standard one (checked against the NIST vectors in
// tests/runtime/test_code_cache.py) and must not depend on the host or on any library.
//
// Guarantees: Sha256 hashes any byte stream fed in pieces of any size; hex() is lowercase.
// Uses the x86 SHA instructions when the CPU has them (same digests; ~5x faster, which matters
// for checking a 40 MB precompiled header). Not constant-time; it guards against corruption, not against an attacker choosing inputs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  // use_cpu_extensions=false forces the portable code (tests check both give the same digests).
  explicit Sha256(bool use_cpu_extensions = true);
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view bytes) { return update(bytes.data(), bytes.size()); }
  // Ends the stream: no update() may follow.
  Digest finish();

  static std::string hex(const Digest& digest);

 private:
  // Processes `count` whole 64-byte blocks: with the x86 SHA extensions where the CPU has them.
  void compress(const uint8_t* blocks, size_t count);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_;
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
  bool use_cpu_extensions_;
};

// Lowercase hex digest of `bytes`.
std::string sha256_hex(std::string_view bytes, bool use_cpu_extensions = true);

}  // namespace ember
