#include "src/topo/xml.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace braid {
namespace topo {

const std::string* XmlElement::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

XmlElement& XmlElement::set(const std::string& key, const std::string& value) {
  for (auto& kv : attrs)
    if (kv.first == key) {
      kv.second = value;
      return *this;
    }
  attrs.emplace_back(key, value);
  return *this;
}

XmlElement& XmlElement::add(const std::string& childName) {
  children.emplace_back();
  children.back().name = childName;
  return children.back();
}

namespace {

/// Recursive-descent parser over the whole text; tracks the current line.
class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  bool parseDocument(XmlElement* root, std::string* error) {
    bool ok = parseProlog() && parseElement(root, 0) && parseEpilog();
    if (!ok && error) *error = source_ + ":" + std::to_string(errLine_) + ": " + err_;
    return ok;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool fail(const std::string& what, int line = 0) {
    if (err_.empty()) {
      err_ = what;
      errLine_ = line ? line : line_;
    }
    return false;
  }
  bool atEnd() const { return pos_ >= s_.size(); }
  bool startsWith(const char* p) const { return s_.compare(pos_, strlen(p), p) == 0; }
  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_)
      if (s_[pos_] == '\n') ++line_;
  }
  void skipSpace() {
    while (!atEnd() && isspace(static_cast<unsigned char>(s_[pos_]))) advance(1);
  }
  static bool isNameStart(char c) {
    return isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  }
  static bool isNameChar(char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '-' ||
           c == '.';
  }
  bool parseName(std::string* out, const char* what) {
    if (atEnd() || !isNameStart(s_[pos_])) {
      std::string got = atEnd() ? "end of file" : std::string("'") + s_[pos_] + "'";
      return fail(std::string("expected ") + what + ", got " + got);
    }
    size_t b = pos_;
    while (!atEnd() && isNameChar(s_[pos_])) advance(1);
    *out = s_.substr(b, pos_ - b);
    return true;
  }
  bool skipComment() {  // at "<!--"
    int start = line_;
    size_t end = s_.find("-->", pos_ + 4);
    if (end == std::string::npos) return fail("unterminated comment", start);
    advance(end + 3 - pos_);
    return true;
  }
  /// Skips blanks, comments and processing instructions; fails on other text.
  bool skipMisc(bool allowText) {
    for (;;) {
      skipSpace();
      if (startsWith("<!--")) {
        if (!skipComment()) return false;
      } else if (startsWith("<?")) {
        int start = line_;
        size_t end = s_.find("?>", pos_ + 2);
        if (end == std::string::npos) return fail("unterminated <? ... ?>", start);
        advance(end + 2 - pos_);
      } else if (startsWith("<!")) {
        return fail("DOCTYPE and CDATA sections are not supported");
      } else if (!atEnd() && s_[pos_] != '<' && !allowText) {
        return fail(std::string("unexpected text '") + excerpt() + "'");
      } else {
        return true;
      }
    }
  }
  std::string excerpt() const {
    size_t e = pos_;
    while (e < s_.size() && e < pos_ + 20 && s_[e] != '\n' && s_[e] != '<') ++e;
    return s_.substr(pos_, e - pos_);
  }
  bool parseProlog() { return skipMisc(false); }
  bool parseEpilog() {
    if (!skipMisc(false)) return false;
    if (!atEnd()) return fail("content after the root element");
    return true;
  }
  bool decodeEntities(const std::string& raw, std::string* out, int line) {
    out->clear();
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        *out += raw[i];
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string::npos) return fail("'&' without ';' in attribute value", line);
      std::string ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "lt") *out += '<';
      else if (ent == "gt") *out += '>';
      else if (ent == "amp") *out += '&';
      else if (ent == "quot") *out += '"';
      else if (ent == "apos") *out += '\'';
      else if (ent.size() > 1 && ent[0] == '#') {
        bool hex = ent[1] == 'x' || ent[1] == 'X';
        const char* digits = ent.c_str() + (hex ? 2 : 1);
        char* end = nullptr;
        long v = strtol(digits, &end, hex ? 16 : 10);
        if (!*digits || *end || v <= 0 || v > 127)
          return fail("unsupported character reference '&" + ent + ";'", line);
        *out += static_cast<char>(v);
      } else {
        return fail("unknown entity '&" + ent + ";'", line);
      }
      i = semi;
    }
    return true;
  }
  bool parseAttributes(XmlElement* e, bool* selfClosing) {
    for (;;) {
      size_t before = pos_;
      skipSpace();
      if (atEnd()) return fail("unterminated tag <" + e->name + ">", e->line);
      if (s_[pos_] == '>') {
        advance(1);
        *selfClosing = false;
        return true;
      }
      if (startsWith("/>")) {
        advance(2);
        *selfClosing = true;
        return true;
      }
      if (pos_ == before) return fail("expected whitespace between attributes");
      std::string key;
      if (!parseName(&key, "attribute name")) return false;
      skipSpace();
      if (atEnd() || s_[pos_] != '=') return fail("attribute '" + key + "' has no '=value'");
      advance(1);
      skipSpace();
      if (atEnd() || (s_[pos_] != '"' && s_[pos_] != '\''))
        return fail("value of attribute '" + key + "' is not quoted");
      char q = s_[pos_];
      int valueLine = line_;
      advance(1);
      size_t end = s_.find(q, pos_);
      if (end == std::string::npos)
        return fail("unterminated value of attribute '" + key + "'", valueLine);
      std::string raw = s_.substr(pos_, end - pos_);
      if (raw.find('<') != std::string::npos)
        return fail("'<' in value of attribute '" + key + "'", valueLine);
      advance(end + 1 - pos_);
      std::string value;
      if (!decodeEntities(raw, &value, valueLine)) return false;
      if (e->attr(key)) return fail("duplicate attribute '" + key + "'", valueLine);
      e->attrs.emplace_back(std::move(key), std::move(value));
    }
  }
  bool parseElement(XmlElement* e, int depth) {
    if (atEnd()) return fail("no root element");
    if (s_[pos_] != '<') return fail(std::string("unexpected text '") + excerpt() + "'");
    if (depth > kMaxDepth) return fail("elements nested too deeply");
    e->line = line_;
    advance(1);
    if (!parseName(&e->name, "element name")) return false;
    bool selfClosing = false;
    if (!parseAttributes(e, &selfClosing)) return false;
    if (selfClosing) return true;
    for (;;) {
      if (!skipMisc(false)) return false;
      if (atEnd())
        return fail("unclosed <" + e->name + "> (opened at line " + std::to_string(e->line) +
                    ")");
      if (startsWith("</")) {
        int closeLine = line_;
        advance(2);
        std::string name;
        if (!parseName(&name, "element name after '</'")) return false;
        skipSpace();
        if (atEnd() || s_[pos_] != '>') return fail("expected '>' after </" + name);
        advance(1);
        if (name != e->name)
          return fail("</" + name + "> closes <" + e->name + "> opened at line " +
                          std::to_string(e->line),
                      closeLine);
        return true;
      }
      e->children.emplace_back();
      if (!parseElement(&e->children.back(), depth + 1)) return false;
    }
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  std::string err_;
  int errLine_ = 0;
};

void writeElement(const XmlElement& e, int depth, std::string* out) {
  out->append(size_t(depth) * 2, ' ');
  *out += '<';
  *out += e.name;
  for (const auto& kv : e.attrs) {
    *out += ' ';
    *out += kv.first;
    *out += "=\"";
    *out += xmlEscape(kv.second);
    *out += '"';
  }
  if (e.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const XmlElement& c : e.children) writeElement(c, depth + 1, out);
  out->append(size_t(depth) * 2, ' ');
  *out += "</" + e.name + ">\n";
}

}  // namespace

bool parseXml(const std::string& text, const std::string& sourceName, XmlElement* root,
              std::string* error) {
  *root = XmlElement();
  Parser p(text, sourceName);
  return p.parseDocument(root, error);
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string writeXml(const XmlElement& root, const std::vector<std::string>& header) {
  std::string out;
  for (const std::string& h : header) {
    std::string safe = h;
    for (size_t p; (p = safe.find("--")) != std::string::npos;) safe.replace(p, 2, "- -");
    out += "<!-- " + safe + " -->\n";
  }
  writeElement(root, 0, &out);
  return out;
}

}  // namespace topo
}  // namespace braid
