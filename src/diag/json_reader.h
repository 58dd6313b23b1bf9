// JsonValue / parseJson: a small strict JSON reader (objects, arrays, strings with
// escapes, numbers, true/false/null), for braid-doctor's flight-record files. Depth is
// limited, so hostile input cannot exhaust the stack.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace braid {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<JsonValue> items;                            ///< kArray
  std::vector<std::pair<std::string, JsonValue>> members;  ///< kObject, in file order

  /// The member `key` of an object (null if absent or not an object).
  const JsonValue* get(const std::string& key) const;
  /// Member accessors with a fallback for a missing or mistyped member.
  std::string str(const std::string& key, const std::string& def = "") const;
  int64_t num(const std::string& key, int64_t def = 0) const;
};

/// Parses `text` into *out. On failure returns false with *error saying where and why.
bool parseJson(const std::string& text, JsonValue* out, std::string* error);

}  // namespace braid
