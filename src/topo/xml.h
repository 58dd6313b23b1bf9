// A small XML reader/writer for topology files: elements, attributes (single or double
// quoted), comments, self-closing tags, an optional <?xml ...?> declaration and the five
// predefined entities (&lt; &gt; &amp; &quot; &apos;) plus numeric ones (&#10; &#x41;).
// No namespaces, DTDs, CDATA or mixed content: text between elements must be blank.
// Every error names the source and the line: "topo.xml:12: unclosed <pci> (opened at line 4)".
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace braid {
namespace topo {

/// One element: its name, attributes in file order and child elements.
struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlElement> children;
  int line = 0;  ///< line of the opening tag (1-based); 0 for elements built in code

  /// The attribute's value, or nullptr if absent.
  const std::string* attr(const std::string& key) const;
  /// Sets (replaces or appends) an attribute; returns *this for chaining.
  XmlElement& set(const std::string& key, const std::string& value);
  /// Appends a child element and returns it.
  XmlElement& add(const std::string& childName);
};

/// Parses a document with exactly one root element. On failure returns false and sets
/// *error to "<sourceName>:<line>: <what>".
bool parseXml(const std::string& text, const std::string& sourceName, XmlElement* root,
              std::string* error);

/// Writes the element as indented XML (two spaces per level, self-closing when empty),
/// preceded by `header` lines (each written as an XML comment) if given.
std::string writeXml(const XmlElement& root, const std::vector<std::string>& header = {});

/// Escapes &, <, >, " and ' for use in an attribute value.
std::string xmlEscape(const std::string& s);

}  // namespace topo
}  // namespace braid
