#include "src/diag/json_reader.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace braid {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}
  bool parse(JsonValue* out, std::string* error) {
    bool ok = value(out, 0);
    if (ok) {
      space();
      if (i_ != t_.size()) ok = fail("trailing characters");
    }
    if (!ok && error) *error = "offset " + std::to_string(i_) + ": " + why_;
    return ok;
  }

 private:
  bool fail(const char* why) {
    if (why_.empty()) why_ = why;
    return false;
  }
  void space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t'))
      ++i_;
  }
  bool literal(const char* word) {
    size_t n = 0;
    while (word[n]) ++n;
    if (t_.compare(i_, n, word) != 0) return fail("unknown literal");
    i_ += n;
    return true;
  }
  bool value(JsonValue* v, int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    space();
    if (i_ >= t_.size()) return fail("unexpected end");
    const char c = t_[i_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v->kind = JsonValue::Kind::kString;
      return string(&v->text);
    }
    if (c == 't' || c == 'f') {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      v->kind = JsonValue::Kind::kNull;
      return literal("null");
    }
    return number(v);
  }
  bool number(JsonValue* v) {
    const size_t start = i_;
    if (i_ < t_.size() && t_[i_] == '-') ++i_;
    size_t digits = 0;
    while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_, ++digits;
    if (digits == 0) return fail("expected a value");
    if (i_ < t_.size() && t_[i_] == '.') {
      ++i_;
      size_t frac = 0;
      while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_, ++frac;
      if (frac == 0) return fail("digits expected after '.'");
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      size_t exp = 0;
      while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_, ++exp;
      if (exp == 0) return fail("digits expected in the exponent");
    }
    v->kind = JsonValue::Kind::kNumber;
    v->number = std::strtod(t_.substr(start, i_ - start).c_str(), nullptr);
    return true;
  }
  static void utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += char(cp);
    } else if (cp < 0x800) {
      *out += char(0xC0 | (cp >> 6));
      *out += char(0x80 | (cp & 0x3F));
    } else {
      *out += char(0xE0 | (cp >> 12));
      *out += char(0x80 | ((cp >> 6) & 0x3F));
      *out += char(0x80 | (cp & 0x3F));
    }
  }
  bool string(std::string* out) {
    ++i_;  // the opening quote
    for (;;) {
      if (i_ >= t_.size()) return fail("unterminated string");
      const char c = t_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i_ >= t_.size()) return fail("unterminated escape");
      const char e = t_[i_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          if (i_ + 4 > t_.size()) return fail("short \\u escape");
          uint32_t cp = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = t_[i_++];
            cp <<= 4;
            if (h >= '0' && h <= '9') cp |= uint32_t(h - '0');
            else if (h >= 'a' && h <= 'f') cp |= uint32_t(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') cp |= uint32_t(h - 'A' + 10);
            else return fail("bad hex digit in \\u escape");
          }
          utf8(cp, out);
          break;
        }
        default: return fail("unknown escape");
      }
    }
  }
  bool array(JsonValue* v, int depth) {
    ++i_;
    v->kind = JsonValue::Kind::kArray;
    space();
    if (i_ < t_.size() && t_[i_] == ']') return ++i_, true;
    for (;;) {
      v->items.emplace_back();
      if (!value(&v->items.back(), depth + 1)) return false;
      space();
      if (i_ >= t_.size()) return fail("unterminated array");
      if (t_[i_] == ']') return ++i_, true;
      if (t_[i_] != ',') return fail("expected ',' or ']'");
      ++i_;
    }
  }
  bool object(JsonValue* v, int depth) {
    ++i_;
    v->kind = JsonValue::Kind::kObject;
    space();
    if (i_ < t_.size() && t_[i_] == '}') return ++i_, true;
    for (;;) {
      space();
      if (i_ >= t_.size() || t_[i_] != '"') return fail("expected a key");
      std::string key;
      if (!string(&key)) return false;
      space();
      if (i_ >= t_.size() || t_[i_] != ':') return fail("expected ':'");
      ++i_;
      v->members.emplace_back(std::move(key), JsonValue());
      if (!value(&v->members.back().second, depth + 1)) return false;
      space();
      if (i_ >= t_.size()) return fail("unterminated object");
      if (t_[i_] == '}') return ++i_, true;
      if (t_[i_] != ',') return fail("expected ',' or '}'");
      ++i_;
    }
  }

  const std::string& t_;
  size_t i_ = 0;
  std::string why_;
};

}  // namespace

const JsonValue* JsonValue::get(const std::string& key) const {
  if (kind != Kind::kObject) return nullptr;
  for (const auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

std::string JsonValue::str(const std::string& key, const std::string& def) const {
  const JsonValue* v = get(key);
  return v && v->kind == Kind::kString ? v->text : def;
}

int64_t JsonValue::num(const std::string& key, int64_t def) const {
  const JsonValue* v = get(key);
  if (!v || v->kind != Kind::kNumber || !std::isfinite(v->number) || std::fabs(v->number) > 9.2e18)
    return def;
  return int64_t(v->number);
}

bool parseJson(const std::string& text, JsonValue* out, std::string* error) {
  *out = JsonValue();
  return Parser(text).parse(out, error);
}

}  // namespace braid
