// NetRegistry: which networks this process has and which one carries inter-host traffic.
//
// Candidates, in NCCL's order of preference:
//   1. external plugins (NCCL_NET_PLUGIN: names, library names or paths, comma list;
//      'none' for none; unset: libnccl-net.so if it loads). The first that loads, has a
//      table (ncclNetPlugin_v11 .. v8, older ones adapted to v11), initialises and has a
//      device is the one external net; the others are not used, as in NCCL.
//   2. IB verbs (unless NCCL_IB_DISABLE), where a device has an active port;
//   3. UCX (only when asked for by name: it would otherwise run over TCP too);
//   4. Socket, always.
// NCCL_NET (or ncclConfig_t::netName) picks one of them by name; without it the first
// available wins. A plugin that cannot be used gives a WARN saying why, and Braid goes
// on with the next candidate; a name no network answers to is an error.
//
// Every net is initialised once per process (its ctx is shared by all communicators)
// and stays loaded until exit: comms of one process may use different nets.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"
#include "transports/net/builtin_nets.h"

namespace braid {

/// One usable network: its v11 table (adapted if the plugin is older), its context
/// and devices.
struct Net {
  const ncclNet_v11_t* table = nullptr;
  void* ctx = nullptr;
  std::string name;         ///< the table's name ("Socket", "IB", "UCX", a plugin's)
  int abiVersion = 11;      ///< table version the library exported
  bool external = false;
  std::string library;      ///< external: the library's path as loaded
  std::vector<ncclNetProperties_v11_t> devices;
  /// external: the library's ncclCollNetPlugin_v11 table, if it has one (CollNet).
  const ncclCollNet_v11_t* collTable = nullptr;
  NetExtensions ext;  ///< what a built-in net offers beyond the ABI (builtin_nets.h)
};

class NetRegistry {
 public:
  static NetRegistry& get();

  /// The net for this communicator: `preferred` is a name ("" = automatic). Reads
  /// NCCL_NET_PLUGIN and NCCL_IB_DISABLE; logs the choice under the NET subsystem.
  ncclResult_t select(const std::string& preferred, const Net** out);

  /// What braid-info shows: every candidate with its state (loaded nets with devices,
  /// plugins that failed with the reason).
  struct Entry {
    std::string name;
    std::string state;  ///< "ok", or why it is not usable
    const Net* net = nullptr;
  };
  std::vector<Entry> describe();

 private:
  NetRegistry() = default;
  /// Initialised built-in net (nullptr with *why set when unusable).
  const Net* builtin(const char* which, std::string* why);
  /// The external net from the current NCCL_NET_PLUGIN (nullptr: none usable).
  const Net* external(std::vector<Entry>* failures);

  std::mutex mu_;
  std::vector<std::unique_ptr<Net>> nets_;  ///< every net initialised so far
  struct Tried {
    std::string spec;     ///< one NCCL_NET_PLUGIN item
    const Net* net;       ///< usable net, or nullptr
    std::string why;      ///< when not usable
  };
  std::vector<Tried> plugins_;  ///< external plugins tried so far (by spec)
  struct Builtin {
    std::string which;
    const Net* net;
    std::string why;
  };
  std::vector<Builtin> builtins_;
  const Net* lastLogged_ = nullptr;  ///< the choice last reported in the log
};

/// Loads an external plugin library: `spec` as NCCL_NET_PLUGIN gives it. On success
/// *net has table (v11 view), abiVersion, library and name. On failure returns false
/// with *why ("not found", "no ncclNetPlugin_v11..v8 table", ...). (net_plugin_loader.cc)
bool loadNetPlugin(const std::string& spec, Net* net, std::string* why, bool* notFound);

/// The logger handed to plugins' init(): their lines go to Braid's log.
void netPluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...);
/// The profiler callback handed to plugins' init(): Braid records no plugin events.
ncclResult_t netNoProfiler(void**, int, void*, int64_t, void*);

}  // namespace braid
