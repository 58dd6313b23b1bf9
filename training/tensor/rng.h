// Rng: a small deterministic random number generator for initialisation, data sampling
// and corpus generation. xoshiro256** seeded through splitmix64; uniform doubles from the
// top 53 bits; normals by Box-Muller. Everything is specified bit for bit here (unlike
// std::normal_distribution, whose output is implementation-defined), so the same
// (seed, name) gives the same tensor on every machine and in every parallel layout.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

namespace braid {
namespace train {

/// One splitmix64 step: advances `state` and returns the next output.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// FNV-1a 64-bit hash of a string (stable across platforms).
inline uint64_t hashString(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

/// Combines two 64-bit values into one seed (order matters).
inline uint64_t mixSeeds(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  return splitmix64(s);
}

/// xoshiro256** with uniform, integer and normal draws (see the file comment).
class Rng {
 public:
  /// Seeds the 256-bit state from `seed` with splitmix64 (never all zero).
  explicit Rng(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& w : s_) w = splitmix64(sm);
  }
  /// A generator for stream `b` of seed `a` (e.g. (seed, step), (seed, hash(name))).
  Rng(uint64_t a, uint64_t b) : Rng(mixSeeds(a, b)) {}

  /// The next 64 random bits (xoshiro256**).
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  /// Uniform integer in [0, n) (n > 0), without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  /// Standard normal N(0, 1) by Box-Muller (the second value of each pair is cached).
  double normal() {
    if (haveSpare_) {
      haveSpare_ = false;
      return spare_;
    }
    double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    double u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    double a = 6.283185307179586476925286766559 * u2;
    spare_ = r * std::sin(a);
    haveSpare_ = true;
    return r * std::cos(a);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool haveSpare_ = false;
};

}  // namespace train
}  // namespace braid
