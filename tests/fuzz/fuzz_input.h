// Helpers shared by the fuzz harnesses (tests/fuzz/fuzz_*.cc): a cursor that takes
// numbers, choices and strings from the front of the fuzzer's input, a check that aborts
// (so that libFuzzer and the replay runner both report it as a crash) and a guard that
// keeps socket-address parsing away from the DNS resolver.
#pragma once
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

/// Aborts with the failed condition: an oracle the library broke, not a bad input.
#define FUZZ_CHECK(cond)                                                               \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);  \
      abort();                                                                         \
    }                                                                                  \
  } while (0)

namespace braid_fuzz {

/// Reads the input from the front; past its end every read yields zeros.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t left() const { return size_ - pos_; }

  /// sizeof(T) bytes, little-endian, zero-filled past the end.
  template <class T>
  T take() {
    T v{};
    const size_t n = left() < sizeof(T) ? left() : sizeof(T);
    if (n) memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }
  uint8_t byte() { return take<uint8_t>(); }
  bool flag() { return (byte() & 1) != 0; }
  /// A value in [0, n) (n > 0).
  uint32_t below(uint32_t n) { return take<uint16_t>() % n; }

  /// Up to `n` bytes, as many as are left.
  std::string bytes(size_t n) {
    if (n > left()) n = left();
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  /// A length byte, then that many bytes (at most maxLen).
  std::string shortString(size_t maxLen) { return bytes(byte() % (maxLen + 1)); }
  /// Everything that is left.
  std::string rest() { return bytes(left()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// The text up to its first NUL (what a C API or the environment would see).
inline std::string cString(const std::string& s) { return std::string(s.c_str()); }

/// Whether SockAddr::parse(text) decides without the resolver: it rejects the text
/// before looking the host up, or the host is a numeric IPv4/IPv6 address. The fuzzers
/// hand only such texts to it, so that no run sends a DNS query or waits on one.
inline bool addrAvoidsResolver(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return true;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) return true;
    host = text.substr(0, colon);
    if (host.find(':') != std::string::npos) return true;
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return true;
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace braid_fuzz
