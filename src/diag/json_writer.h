// JsonWriter: builds a JSON text (objects, arrays, strings with escapes, integers,
// numbers), with the commas placed for the caller. For the flight recorder's files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid {

class JsonWriter {
 public:
  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }
  /// An object's key (the value follows).
  void key(const std::string& k);
  void value(const std::string& s);
  void value(int64_t v);
  void value(double v);
  void value(bool v);
  void field(const std::string& k, const std::string& v) { key(k), value(v); }
  void field(const std::string& k, const char* v) { key(k), value(std::string(v)); }
  void field(const std::string& k, int64_t v) { key(k), value(v); }
  void field(const std::string& k, double v) { key(k), value(v); }
  void field(const std::string& k, bool v) { key(k), value(v); }
  const std::string& str() const { return out_; }

 private:
  void open(char c);
  void close(char c);
  void separate();  ///< a comma before every element but the first
  std::string out_;
  std::vector<bool> first_;  ///< per open container: nothing written yet
  bool afterKey_ = false;
};

/// `s` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string& s);

}  // namespace braid
