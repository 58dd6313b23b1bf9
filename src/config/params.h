// The one typed registry of environment variables. Every variable Braid reads is
// declared here and defined (default, meaning) in params.cc; `braid-info` prints them
// all. NCCL_ names keep NCCL's meaning; BRAID_ names are our own.
//
//   int64_t bytes = param::kBuffSize.get();   // reads the environment each call
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid {

enum class ParamType { kInt, kBool, kString };

class ParamBase {
 public:
  ParamBase(const char* name, ParamType type, std::string defaultValue, const char* meaning);
  const char* name() const { return name_; }
  ParamType type() const { return type_; }
  const std::string& defaultValue() const { return default_; }
  const char* meaning() const { return meaning_; }
  /// Raw value from the environment, or nullptr if unset (or set to "").
  const char* raw() const;
  /// The value as text: the environment's if set, else the default.
  std::string text() const;
  /// Every registered parameter, sorted by name.
  static std::vector<const ParamBase*> all();

 private:
  const char* name_;
  ParamType type_;
  std::string default_;
  const char* meaning_;
};

class IntParam : public ParamBase {
 public:
  IntParam(const char* name, int64_t def, const char* meaning);
  /// Environment value (decimal, 0x hex, K/M/G suffixes) or the default. A malformed
  /// value warns once and yields the default.
  int64_t get() const;
  int64_t defaultInt() const { return def_; }

 private:
  int64_t def_;
};

class BoolParam : public ParamBase {
 public:
  BoolParam(const char* name, bool def, const char* meaning);
  bool get() const;  ///< "1", "true", "yes", "on" (any case) are true
};

class StringParam : public ParamBase {
 public:
  StringParam(const char* name, const char* def, const char* meaning);
  std::string get() const;
};

namespace param {
// Logging
extern const StringParam kDebug;         // NCCL_DEBUG
extern const StringParam kDebugSubsys;   // NCCL_DEBUG_SUBSYS
extern const StringParam kDebugFile;     // NCCL_DEBUG_FILE
// Algorithm selection
extern const StringParam kAlgo;          // NCCL_ALGO
extern const StringParam kProto;         // NCCL_PROTO
extern const StringParam kTunerModel;    // BRAID_TUNER_MODEL
extern const StringParam kTopoFile;      // NCCL_TOPO_FILE
extern const StringParam kTopoDumpFile;  // NCCL_TOPO_DUMP_FILE
extern const IntParam kMinNChannels;     // NCCL_MIN_NCHANNELS
extern const IntParam kMaxNChannels;     // NCCL_MAX_NCHANNELS
extern const IntParam kDeviceNChannels;  // BRAID_DEVICE_NCHANNELS
extern const BoolParam kDeviceDirect;    // BRAID_DEVICE_DIRECT
extern const IntParam kSmallMsgBytes;    // BRAID_SMALL_MSG_BYTES
extern const BoolParam kBoard;           // BRAID_BOARD
extern const IntParam kBoardInlineBytes;  // BRAID_BOARD_INLINE_BYTES
extern const IntParam kBoardCopyMaxBytes;  // BRAID_BOARD_COPY_MAX_BYTES
extern const IntParam kBoardCmaMaxBytes;  // BRAID_BOARD_CMA_MAX_BYTES
// Transports
extern const BoolParam kShmDisable;      // NCCL_SHM_DISABLE
extern const BoolParam kP2pDisable;      // NCCL_P2P_DISABLE
extern const StringParam kSocketIfname;  // NCCL_SOCKET_IFNAME
extern const StringParam kCommId;        // NCCL_COMM_ID
extern const StringParam kHostId;        // NCCL_HOSTID
extern const IntParam kBuffSize;         // NCCL_BUFFSIZE
extern const StringParam kTransport;     // BRAID_TRANSPORT
// Networks (transports/net and the nets under it)
extern const StringParam kNet;           // NCCL_NET
extern const StringParam kNetPlugin;     // NCCL_NET_PLUGIN
extern const BoolParam kIbDisable;       // NCCL_IB_DISABLE
extern const StringParam kIbHca;         // NCCL_IB_HCA
extern const IntParam kIbGidIndex;       // NCCL_IB_GID_INDEX
extern const IntParam kIbRoceVersion;    // NCCL_IB_ROCE_VERSION_NUM
extern const IntParam kIbTimeout;        // NCCL_IB_TIMEOUT
extern const IntParam kIbRetryCnt;       // NCCL_IB_RETRY_CNT
extern const IntParam kIbQpsPerConn;     // NCCL_IB_QPS_PER_CONNECTION
extern const IntParam kIbTc;             // NCCL_IB_TC
extern const IntParam kIbSl;             // NCCL_IB_SL
extern const BoolParam kIbRegCache;      // BRAID_IB_REG_CACHE
extern const StringParam kUcxTls;        // BRAID_UCX_TLS
extern const IntParam kNetMaxInflight;   // BRAID_NET_INFLIGHT
extern const IntParam kFifoSlots;        // BRAID_FIFO_SLOTS
extern const BoolParam kShmCma;          // BRAID_SHM_CMA
extern const IntParam kCmaMinBytes;      // BRAID_CMA_MIN_BYTES
extern const BoolParam kStreamStores;    // BRAID_STREAM_STORES
extern const IntParam kStreamOutputBytes;  // BRAID_STREAM_OUTPUT_BYTES
extern const StringParam kSwitch;       // BRAID_SWITCH
extern const IntParam kSwitchTimeoutMs;  // BRAID_SWITCH_TIMEOUT_MS
extern const BoolParam kCollNetEnable;   // NCCL_COLLNET_ENABLE
extern const IntParam kCollNetNodeThreshold;  // NCCL_COLLNET_NODE_THRESHOLD
extern const IntParam kCollNetInflight;  // BRAID_COLLNET_INFLIGHT
// Timeouts and faults
extern const IntParam kTimeoutMs;        // BRAID_TIMEOUT_MS
extern const IntParam kBootstrapTimeoutMs;  // BRAID_BOOTSTRAP_TIMEOUT_MS
extern const IntParam kPeerCheckMs;      // BRAID_PEER_CHECK_MS
extern const IntParam kSpinUs;           // BRAID_SPIN_US
extern const IntParam kSleep;            // BRAID_SLEEP
// Diagnosis (src/diag)
extern const IntParam kFlightRecorder;   // BRAID_FLIGHT_RECORDER
extern const StringParam kFlightRecorderDir;  // BRAID_FLIGHT_RECORDER_DIR
extern const BoolParam kFlightRecorderSignal;  // BRAID_FLIGHT_RECORDER_SIGNAL
extern const StringParam kCheck;         // BRAID_CHECK (see checkLevel)
/// BRAID_CHECK as a level: 0 off ("0", "false", "no", "off"), 1 the free in-band check
/// (unset), 2 the full fingerprint exchange as well ("1", "true", "yes", "on"). Anything
/// else warns once and is 1.
int checkLevel();
// Reduction kernels
extern const StringParam kSimd;          // BRAID_SIMD
}  // namespace param

}  // namespace braid
