// The XML reader/writer (src/topo/xml.h) and the topology format on top of it.
#include <gtest/gtest.h>

#include "src/topo/xml.h"
#include "tests/topo/helpers.h"

namespace braid {
namespace topo {
namespace {

using test::parse;
using test::parseError;

std::string xmlError(const std::string& text) {
  XmlElement root;
  std::string err;
  EXPECT_FALSE(parseXml(text, "t.xml", &root, &err)) << "accepted:\n" << text;
  return err;
}

TEST(TopoXml, ParsesElementsAttributesCommentsAndEntities) {
  const char* text =
      "<?xml version=\"1.0\"?>\n"
      "<!-- a comment -->\n"
      "<a x=\"1\" y='two' z=\"&lt;&amp;&gt;&quot;&apos;&#65;&#x42;\">\n"
      "  <!-- inside -->\n"
      "  <b/>\n"
      "  <c k = \"v\" ></c>\n"
      "  <d><e/></d>\n"
      "</a>\n"
      "<!-- trailing -->\n";
  XmlElement root;
  std::string err;
  ASSERT_TRUE(parseXml(text, "t.xml", &root, &err)) << err;
  EXPECT_EQ(root.name, "a");
  EXPECT_EQ(root.line, 3);
  ASSERT_NE(root.attr("x"), nullptr);
  EXPECT_EQ(*root.attr("x"), "1");
  EXPECT_EQ(*root.attr("y"), "two");
  EXPECT_EQ(*root.attr("z"), "<&>\"'AB");
  EXPECT_EQ(root.attr("missing"), nullptr);
  ASSERT_EQ(root.children.size(), 3u);
  EXPECT_EQ(root.children[0].name, "b");
  EXPECT_EQ(root.children[0].line, 5);
  EXPECT_EQ(*root.children[1].attr("k"), "v");
  ASSERT_EQ(root.children[2].children.size(), 1u);
  EXPECT_EQ(root.children[2].children[0].name, "e");
}

TEST(TopoXml, WriterEscapesAndRoundTrips) {
  XmlElement e;
  e.name = "r";
  e.set("q", "a\"b<c>&'d");
  e.add("child").set("n", "1");
  std::string text = writeXml(e, {"header -- with dashes"});
  EXPECT_NE(text.find("<!-- header - - with dashes -->"), std::string::npos) << text;
  XmlElement back;
  std::string err;
  ASSERT_TRUE(parseXml(text, "w.xml", &back, &err)) << err;
  EXPECT_EQ(*back.attr("q"), "a\"b<c>&'d");
  EXPECT_EQ(writeXml(back, {"header -- with dashes"}), text);
}

TEST(TopoXml, EveryMalformedFormNamesTheLine) {
  struct Case {
    const char* text;
    const char* expect;  // substring of the error, which starts with "t.xml:<line>:"
    int line;
  };
  const Case cases[] = {
      {"", "no root element", 1},
      {"<a>\n<b>\n</a>", "</a> closes <b> opened at line 2", 3},
      {"<a>\n  <b>\n", "unclosed <b> (opened at line 2)", 3},
      {"<a\n x=1/>", "not quoted", 2},
      {"<a x=\"1\"\n y=\"2/>\n", "unterminated value of attribute 'y'", 2},
      {"<a x=\"1\" x=\"2\"/>", "duplicate attribute 'x'", 1},
      {"<a x=\"1\"y=\"2\"/>", "expected whitespace between attributes", 1},
      {"<a\n\n x/>", "attribute 'x' has no '=value'", 3},
      {"<a/>\n<b/>", "content after the root element", 2},
      {"<a>\n  text\n</a>", "unexpected text 'text'", 2},
      {"<a>\n<!-- never closed\n</a>", "unterminated comment", 2},
      {"<a x=\"&bogus;\"/>", "unknown entity '&bogus;'", 1},
      {"<a x=\"a & b\"/>", "'&' without ';'", 1},
      {"<a>\n<1b/>\n</a>", "expected element name", 2},
      {"<!DOCTYPE x>\n<a/>", "DOCTYPE", 1},
      {"<a>\n</a >x", "unexpected text", 2},
      {"<a x=\"<\"/>", "'<' in value", 1},
      {"<a", "unterminated tag <a>", 1},
  };
  for (const Case& c : cases) {
    std::string err = xmlError(c.text);
    std::string prefix = "t.xml:" + std::to_string(c.line) + ": ";
    EXPECT_EQ(err.compare(0, prefix.size(), prefix), 0) << c.text << "\n-> " << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.text << "\n-> " << err;
  }
}

TEST(TopoXml, TopologyErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* expect;
    int line;
  };
  const Case cases[] = {
      {"<topology/>", "root element is <topology>, expected <system>", 1},
      {"<system>\n<cpu/>\n</system>", "<cpu> needs attribute numaid", 2},
      {"<system>\n<cpu numaid=\"x\"/>\n</system>", "numaid=\"x\" is not an integer", 2},
      {"<system>\n<cpu numaid=\"0\"/>\n<cpu numaid=\"0\"/>\n</system>", "second <cpu>", 3},
      {"<system><cpu numaid=\"0\">\n<pci class=\"0x030200\"/></cpu></system>",
       "<pci> needs attribute busid", 2},
      {"<system><cpu numaid=\"0\">\n<pci busid=\"0:1:0.0\" vendor=\"0xzz\"/></cpu></system>",
       "vendor=\"0xzz\" is not a hexadecimal number", 2},
      {"<system><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" link_speed=\"fast\"/>"
       "</cpu></system>",
       "link_speed=\"fast\"", 2},
      {"<system><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\"><gpu/></pci>\n"
       "<pci busid=\"0000:01:00.0\"><gpu/></pci></cpu></system>",
       "second <pci> with busid=\"0000:01:00.0\"", 3},
      {"<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\">\n<gpu dev=\"0\">\n"
       "<nvlink target=\"0000:99:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
       "</gpu></pci></cpu></system>",
       "nvlink target \"0000:99:00.0\" is not a GPU or NVSwitch", 3},
      {"<system><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\"><gpu/><nic/></pci>"
       "</cpu></system>",
       "not a mix", 2},
      {"<system><cpu numaid=\"0\"><nic>\n<net dev=\"0\"/></nic></cpu></system>",
       "<net> needs attribute name", 2},
      {"<system><cpu numaid=\"0\"><nic><net name=\"a\" dev=\"0\"/>\n<net name=\"b\" dev=\"0\"/>"
       "</nic></cpu></system>",
       "second <net> with dev=\"0\"", 2},
      {"<system><cpu numaid=\"0\">\n<core id=\"0\" cpus=\"1-\"/></cpu></system>", "cpus=\"1-\"",
       2},
      {"<system>\n<core id=\"0\"/></system>", "<core> must be inside a <cpu>", 2},
      {"<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><gpu dev=\"0\">\n"
       "<nvlink target=\"nvs\" tclass=\"0x068000\" bw=\"-3\"/></gpu></pci></cpu></system>",
       "bw=\"-3\"", 2},
      {"<system version=\"one\"/>", "version=\"one\"", 1},
      {"<system><cpu numaid=\"0\">\n<gpu dev=\"0\"/></cpu></system>",
       "<gpu> must be inside <pci>", 2},
      {"<system>\n<net name=\"eth0\"/></system>", "<net> must be inside <nic>", 2},
      {"<system>\n<cpu numaid=\"0\" affinity=\"zz,ff\"/></system>", "affinity=\"zz,ff\"", 2},
  };
  for (const Case& c : cases) {
    std::string err = parseError(c.text);
    std::string prefix = "bad.xml:" + std::to_string(c.line) + ": ";
    EXPECT_EQ(err.compare(0, prefix.size(), prefix), 0) << c.text << "\n-> " << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.text << "\n-> " << err;
  }
}

TEST(TopoXml, MissingFileIsAClearError) {
  std::string err;
  EXPECT_FALSE(Topology::load("/nonexistent/topo.xml", &err));
  EXPECT_NE(err.find("/nonexistent/topo.xml: cannot open"), std::string::npos) << err;
}

TEST(TopoXml, NcclStyleFileLoads) {
  // NCCL's own vocabulary with attributes we ignore, NVSwitches known only as nvlink
  // targets, a GPU-GPU link listed from both ends, and unknown elements (skipped).
  Topology t = parse(
      "<system version=\"1\">\n"
      "  <cpu numaid=\"0\" affinity=\"ff\" arch=\"x86_64\" vendor=\"GenuineIntel\" "
      "familyid=\"6\" modelid=\"106\">\n"
      "    <pci busid=\"0000:07:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x20b0\" "
      "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
      "      <gpu dev=\"0\" sm=\"80\" rank=\"3\" gdr=\"1\">\n"
      "        <nvlink target=\"0000:08:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
      "        <nvlink target=\"ffffffff:ff:ff.f\" count=\"12\" tclass=\"0x068000\"/>\n"
      "      </gpu>\n"
      "    </pci>\n"
      "    <pci busid=\"0000:08:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x20b0\">\n"
      "      <gpu dev=\"1\" sm=\"80\">\n"
      "        <nvlink target=\"0000:07:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
      "        <nvlink target=\"ffffffff:ff:ff.f\" count=\"10\" tclass=\"0x068000\"/>\n"
      "      </gpu>\n"
      "    </pci>\n"
      "    <pci busid=\"0000:09:00.0\" class=\"0x020000\" vendor=\"0x15b3\" device=\"0x101b\">\n"
      "      <nic><net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" port=\"1\" latency=\"0\" "
      "guid=\"0x1\" maxconn=\"131072\" gdr=\"1\"/></nic>\n"
      "    </pci>\n"
      "    <c2c count=\"1\"/>\n"
      "  </cpu>\n"
      "</system>\n");
  EXPECT_EQ(t.count(NodeType::kGpu), 2);
  EXPECT_EQ(t.count(NodeType::kNvSwitch), 1);
  EXPECT_EQ(t.count(NodeType::kNic), 1);
  EXPECT_EQ(t.count(NodeType::kCore), 8) << "no <core>s: one per CPU of affinity=\"ff\"";
  EXPECT_EQ(t.node(t.gpuOfCudaDev(0)).rank, 3);
  ASSERT_EQ(t.nvlinks().size(), 3u);  // GPU-GPU once, two GPU-NVSwitch
  // 2 direct links + min(12, 10) through the switch, 25 GB/s each (sm_80).
  Path p = t.path(t.gpuOfCudaDev(0), t.gpuOfCudaDev(1));
  EXPECT_EQ(p.type, PathType::kNvl);
  EXPECT_DOUBLE_EQ(p.gbps, 12 * 25.0);
  EXPECT_EQ(p.hops, 1);
  // Rewriting is stable.
  std::string once = t.toXml();
  EXPECT_EQ(parse(once).toXml(), once);
}

TEST(TopoXml, RoundTripIsLossless) {
  Topology t = test::loadShipped("dgx-h100.xml");
  std::string a = t.toXml();
  Topology u = parse(a);
  EXPECT_EQ(u.toXml(), a);
  ASSERT_EQ(u.size(), t.size());
  for (int i = 0; i < t.size(); ++i) {  // same tree, same fields, in the same order
    const Node& x = t.node(i);
    const Node& y = u.node(i);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.parent, y.parent);
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.pci.busId, y.pci.busId);
    EXPECT_EQ(x.pci.linkGts, y.pci.linkGts);
    EXPECT_EQ(x.cpus, y.cpus);
    EXPECT_EQ(x.speedMbps, y.speedMbps);
    EXPECT_EQ(x.memoryBytes, y.memoryBytes);
    EXPECT_EQ(x.affinity, y.affinity);
  }
}

}  // namespace
}  // namespace topo
}  // namespace braid
