// Shared helpers for the topology tests.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "src/topo/topology.h"

namespace braid {
namespace topo {
namespace test {

inline std::string topologiesDir() { return BRAID_TOPOLOGIES_DIR; }

/// Loads a shipped topology (fails the test if it does not load).
inline Topology loadShipped(const std::string& name) {
  std::string err;
  std::optional<Topology> t = Topology::load(topologiesDir() + "/" + name, &err);
  EXPECT_TRUE(t.has_value()) << err;
  return t ? std::move(*t) : Topology::minimal();
}

/// Parses XML text that must be valid.
inline Topology parse(const std::string& xml) {
  std::string err;
  std::optional<Topology> t = Topology::fromXml(xml, "test.xml", &err);
  EXPECT_TRUE(t.has_value()) << err;
  return t ? std::move(*t) : Topology();
}

/// The error of XML text that must be rejected.
inline std::string parseError(const std::string& xml) {
  std::string err;
  std::optional<Topology> t = Topology::fromXml(xml, "bad.xml", &err);
  EXPECT_FALSE(t.has_value()) << "accepted:\n" << xml;
  return err;
}

}  // namespace test
}  // namespace topo
}  // namespace braid
