// SwitchGroup: one group (one communicator's collnet) on one switch: its ports and the
// data plane of its operations.
//
// A port is a connection that stands for some ranks: a member (one rank), or at the
// root of a two-level tree a leaf switch (the ranks that use that leaf). Ports are
// ordered by their lowest rank (= leaf order at the root), and reductions run over the
// ports in that order, so results are the same bits on every run.
//
// Each operation streams: every port's input lands in its own buffer as it arrives;
// the "combined" stream (the reduction over the ports, or for allgather the ranks'
// pieces in rank order) advances piece by piece as far as all ports have delivered;
// a root's combined stream is the result, a leaf sends it up to its parent and the
// parent's answer is the result. Each port gets its part of the result piece by piece,
// then kDone; operations complete in order.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "src/reduce/reducer.h"
#include "src/tools/switch_server/frame_conn.h"
#include "src/tools/switch_server/protocol_check.h"

namespace braid {

class SwitchGroup {
 public:
  struct Config {
    Hello layout;               ///< the first hello (nranks, layout, secret, group id)
    bool leafPorts = false;     ///< ports are leaf switches (this is a tree's root)
    uint32_t myLeaf = 0;        ///< member ports: the leaf index of this switch
    bool hasUp = false;         ///< a leaf that sends its combined stream to a parent
    size_t pieceBytes = 65536;
    std::string label;          ///< "braid-switch ADDR group 0x..." for messages
  };

  explicit SwitchGroup(Config cfg);

  uint64_t id() const { return cfg_.layout.msg.groupId; }
  uint64_t secret() const { return cfg_.layout.msg.secret; }
  const Config& config() const { return cfg_; }
  const std::string& label() const { return cfg_.label; }

  // ---- forming -----------------------------------------------------------------------
  /// Port index for a hello's rank (member) or leaf index (leaf ports); -1 if none here.
  int portFor(uint32_t id) const;
  bool joined(int port) const { return ports_[size_t(port)].conn != nullptr; }
  void join(int port, FrameConn* c) { ports_[size_t(port)].conn = c; }
  bool complete() const;
  /// "ranks 1, 3" / "leaf switches 1 (ranks 1, 3)": those not joined yet.
  std::string missing() const;
  int numPorts() const { return int(ports_.size()); }
  FrameConn* portConn(int port) const { return ports_[size_t(port)].conn; }
  /// "rank 3" or "leaf switch 1 (ranks 1, 3)".
  std::string portName(int port) const;

  int64_t formDeadlineMs = -1;
  bool formed = false;     ///< every port (and the parent) said yes; kWelcome sent
  FrameConn* up = nullptr; ///< the parent link (hasUp)
  int64_t upRetryMs = -1;  ///< when to try connecting to the parent again (-1: no)
  bool dead = false;       ///< failed or finished: the server drops it after this pass

  // ---- data plane (each returns false with *why when the group must fail) ----------
  bool onOp(int port, uint64_t seq, const wire::OpDesc& d, std::string* why);
  /// Where a data frame from `port` lands; nullptr (and *why) if it does not fit.
  char* dataTarget(int port, const wire::FrameHeader& h, std::string* why);
  void onData(int port, uint64_t seq, uint64_t n);
  char* upDataTarget(const wire::FrameHeader& h, std::string* why);
  void onUpData(uint64_t seq, uint64_t n);
  bool onUpDone(uint64_t seq, std::string* why);
  /// A port said goodbye. Returns false (group fails) if operations are under way.
  bool onBye(int port, std::string* why);
  bool allLeft() const;
  /// Moves every operation as far as the data allows; queues frames on the ports.
  void pump();
  size_t opsInFlight() const { return ops_.size(); }

 private:
  struct Port {
    FrameConn* conn = nullptr;
    uint32_t id = 0;              ///< rank, or leaf index for leaf ports
    std::vector<uint32_t> ranks;  ///< ranks it stands for, ascending
    bool left = false;            ///< said goodbye
    uint64_t nextSeq = 0;         ///< the op it posts next
  };
  struct GatherPiece {
    uint32_t port;
    uint64_t portOff;
    uint64_t len;
  };
  struct PortOut {
    bool posted = false;
    SharedBytes in;
    uint64_t inCap = 0;
    uint64_t inLen = 0;
    uint64_t got = 0;
    std::vector<Span> segs;  ///< its output: spans of the result, in order
    size_t seg = 0;
    uint64_t segDone = 0;
    bool doneSent = false;
  };
  struct Op {
    uint64_t seq = 0;
    wire::OpDesc desc{};
    Reducer reducer;
    size_t typeSize = 1;
    bool reduces = true;
    std::vector<PortOut> ports;
    SharedBytes comb;
    uint64_t combCap = 0;
    uint64_t combLen = 0, combReady = 0;
    std::vector<GatherPiece> walk;
    size_t walkIdx = 0;
    uint64_t walkOff = 0;
    uint64_t upSent = 0;
    SharedBytes res;  ///< == comb at a root
    uint64_t resCap = 0;
    uint64_t resLen = 0, resGot = 0;
    bool resDone = false;
  };

  Op* findOp(uint64_t seq);
  bool makeOp(uint64_t seq, const wire::OpDesc& d, std::string* why);
  void combine(Op& op);
  void sendUp(Op& op);
  void sendOut(Op& op, size_t p);
  bool resultComplete(const Op& op) const;
  /// A buffer of at least n bytes (*cap: its size), from the pool when one fits.
  SharedBytes takeBuffer(uint64_t n, uint64_t* cap);
  /// Keeps a retired op's buffer for reuse unless frames still point into it.
  void giveBack(SharedBytes* b, uint64_t cap);
  void retire(Op& op);

  Config cfg_;
  std::vector<Port> ports_;
  std::vector<uint32_t> coverage_;  ///< ranks this switch stands for, ascending
  std::vector<int> portOfRank_;     ///< per rank: its port here, -1 if none
  std::deque<Op> ops_;
  uint64_t nextOpSeq_ = 0;          ///< the next op to be created
  struct Pooled {
    uint64_t cap;
    SharedBytes bytes;
  };
  std::vector<Pooled> pool_;        ///< buffers of retired ops (no fresh pages per op)
};

}  // namespace braid
