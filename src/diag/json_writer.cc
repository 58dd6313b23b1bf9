#include "src/diag/json_writer.h"

#include <cmath>
#include <cstdio>

namespace braid {

std::string jsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

void JsonWriter::separate() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (first_.empty()) return;
  if (!first_.back()) out_ += ',';
  first_.back() = false;
}

void JsonWriter::open(char c) {
  separate();
  out_ += c;
  first_.push_back(true);
}

void JsonWriter::close(char c) {
  out_ += c;
  if (!first_.empty()) first_.pop_back();
  if (first_.empty()) out_ += '\n';
}

void JsonWriter::key(const std::string& k) {
  separate();
  out_ += jsonQuote(k);
  out_ += ':';
  afterKey_ = true;
}

void JsonWriter::value(const std::string& s) {
  separate();
  out_ += jsonQuote(s);
}

void JsonWriter::value(int64_t v) {
  separate();
  out_ += std::to_string(v);
}

void JsonWriter::value(double v) {
  separate();
  if (!std::isfinite(v)) {
    out_ += "null";
    return;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), "%.17g", v);
  out_ += buf;
}

void JsonWriter::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
}

}  // namespace braid
