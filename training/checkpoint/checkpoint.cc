#include "training/checkpoint/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace braid {
namespace train {
namespace {

constexpr char kMagic[8] = {'B', 'R', 'D', 'C', 'K', 'P', 'T', '1'};

std::string prefixOf(const std::string& part) { return part.empty() ? "" : part + "-"; }

std::string manifestPath(const std::string& dir, const std::string& part) {
  return dir + "/" + prefixOf(part) + "manifest.txt";
}

std::string shardName(const std::string& part, int r, int n) {
  return prefixOf(part) + "shard-" + std::to_string(r) + "-of-" + std::to_string(n) + ".bin";
}

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

File openOrThrow(const std::string& path, const char* mode) {
  File f(std::fopen(path.c_str(), mode));
  if (!f) throw std::runtime_error("checkpoint: cannot open " + path + ": " + std::strerror(errno));
  return f;
}

void writeRaw(FILE* f, const void* p, size_t n, const std::string& path) {
  if (n && std::fwrite(p, 1, n, f) != n)
    throw std::runtime_error("checkpoint: write failed on " + path + ": " + std::strerror(errno));
}

void readRaw(FILE* f, void* p, size_t n, const std::string& path) {
  if (n && std::fread(p, 1, n, f) != n)
    throw std::runtime_error("checkpoint: " + path + " is truncated or unreadable");
}

template <class V>
void put(FILE* f, V v, const std::string& path) {
  writeRaw(f, &v, sizeof(v), path);
}

template <class V>
V get(FILE* f, const std::string& path) {
  V v;
  readRaw(f, &v, sizeof(v), path);
  return v;
}

std::string shapeText(const Shape& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t.empty() ? "scalar" : t;
}

/// A shard file's header: the training state and where each range's data lies.
struct ShardIndex {
  std::string path;
  uint32_t elemSize = 0;
  TrainState state;
  int64_t optStep = 0;
  struct Range {
    int64_t begin = 0, n = 0;
    long dataAt = 0;  ///< file offset of values[n] (then m[n], v[n])
  };
  std::vector<Range> ranges;
};

ShardIndex readIndex(const std::string& path) {
  ShardIndex ix;
  ix.path = path;
  File f = openOrThrow(path, "rb");
  char magic[8];
  readRaw(f.get(), magic, sizeof(magic), path);
  if (std::memcmp(magic, kMagic, sizeof(magic)) != 0)
    throw std::runtime_error("checkpoint: " + path + " is not a Braid checkpoint shard");
  ix.elemSize = get<uint32_t>(f.get(), path);
  ix.state.step = get<int64_t>(f.get(), path);
  ix.state.rngState = get<uint64_t>(f.get(), path);
  ix.state.dataPosition = get<int64_t>(f.get(), path);
  ix.optStep = get<int64_t>(f.get(), path);
  const int64_t nl = get<int64_t>(f.get(), path);
  if (nl < 0 || nl > (int64_t(1) << 30)) throw std::runtime_error("checkpoint: bad header in " + path);
  ix.state.losses.resize(size_t(nl));
  readRaw(f.get(), ix.state.losses.data(), size_t(nl) * sizeof(double), path);
  const int64_t nr = get<int64_t>(f.get(), path);
  if (nr < 0 || nr > (int64_t(1) << 30)) throw std::runtime_error("checkpoint: bad header in " + path);
  ix.ranges.resize(size_t(nr));
  for (auto& r : ix.ranges) {
    r.begin = get<int64_t>(f.get(), path);
    r.n = get<int64_t>(f.get(), path);
  }
  long at = std::ftell(f.get());
  for (auto& r : ix.ranges) {
    r.dataAt = at;
    at += long(3 * r.n * int64_t(ix.elemSize));
  }
  return ix;
}

struct Manifest {
  int dpSize = 0;
  int64_t flatSize = 0;
  uint32_t elemSize = 0;
  struct P {
    std::string name;
    int64_t offset = 0, numel = 0;
    std::string full, local;
  };
  std::vector<P> params;
};

Manifest readManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("checkpoint: cannot open " + path);
  Manifest m;
  std::string line;
  std::getline(in, line);
  if (line != "braid-checkpoint 1") throw std::runtime_error("checkpoint: " + path + " has no 'braid-checkpoint 1' header");
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "dp_size") {
      ls >> m.dpSize;
    } else if (key == "flat_size") {
      ls >> m.flatSize;
    } else if (key == "elem_bytes") {
      ls >> m.elemSize;
    } else if (key == "param") {
      Manifest::P p;
      ls >> p.name >> p.offset >> p.numel >> p.full >> p.local;
      m.params.push_back(p);
    }
  }
  if (m.dpSize < 1 || m.elemSize == 0) throw std::runtime_error("checkpoint: " + path + " is incomplete");
  return m;
}

}  // namespace

bool checkpointExists(const std::string& dir, const std::string& part) {
  return std::filesystem::exists(manifestPath(dir, part));
}

template <class T>
CheckpointSnapshot<T> snapshotCheckpoint(const ProcessGroup& dp, const ParamStore<T>& store,
                                         DataParallel<T>& strategy, const TrainState& state,
                                         const std::string& part) {
  CheckpointSnapshot<T> snap;
  snap.part = part;
  snap.dpRank = dp.rank();
  snap.dpSize = dp.size();
  snap.state = state;
  snap.optStep = strategy.optimizer().step();
  for (const StateSlice<T>& s : strategy.stateSlices(true)) {
    typename CheckpointSnapshot<T>::Range r;
    r.flatBegin = s.flatBegin;
    r.w.assign(s.w, s.w + s.n);
    r.m.assign(s.m, s.m + s.n);
    r.v.assign(s.v, s.v + s.n);
    snap.ranges.push_back(std::move(r));
  }
  if (dp.rank() == 0) {
    std::ostringstream out;
    out << "braid-checkpoint 1\n";
    out << "dp_size " << dp.size() << "\n";
    out << "step " << state.step << "\n";
    out << "elem_bytes " << sizeof(T) << "\n";
    out << "flat_size " << store.flatSize() << "\n";
    out << "# param name flat_offset numel full_shape local_shape\n";
    for (size_t i = 0; i < store.size(); ++i) {
      const Param<T>& p = store[i];
      out << "param " << p.name << " " << p.offset << " " << p.numel() << " " << shapeText(p.fullShape)
          << " " << shapeText(p.shape) << "\n";
    }
    for (int r = 0; r < dp.size(); ++r) out << "shard " << r << " " << shardName(part, r, dp.size()) << "\n";
    snap.manifest = out.str();
  }
  return snap;
}

template <class T>
void writeCheckpointShard(const std::string& dir, const CheckpointSnapshot<T>& snap) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("checkpoint: cannot create " + dir + ": " + ec.message());
  const std::string path = dir + "/" + shardName(snap.part, snap.dpRank, snap.dpSize);
  const std::string tmp = path + ".tmp";
  File f = openOrThrow(tmp, "wb");
  writeRaw(f.get(), kMagic, sizeof(kMagic), tmp);
  put<uint32_t>(f.get(), uint32_t(sizeof(T)), tmp);
  put<int64_t>(f.get(), snap.state.step, tmp);
  put<uint64_t>(f.get(), snap.state.rngState, tmp);
  put<int64_t>(f.get(), snap.state.dataPosition, tmp);
  put<int64_t>(f.get(), snap.optStep, tmp);
  put<int64_t>(f.get(), int64_t(snap.state.losses.size()), tmp);
  writeRaw(f.get(), snap.state.losses.data(), snap.state.losses.size() * sizeof(double), tmp);
  put<int64_t>(f.get(), int64_t(snap.ranges.size()), tmp);
  for (const auto& r : snap.ranges) {
    put<int64_t>(f.get(), r.flatBegin, tmp);
    put<int64_t>(f.get(), int64_t(r.w.size()), tmp);
  }
  for (const auto& r : snap.ranges) {
    writeRaw(f.get(), r.w.data(), r.w.size() * sizeof(T), tmp);
    writeRaw(f.get(), r.m.data(), r.m.size() * sizeof(T), tmp);
    writeRaw(f.get(), r.v.data(), r.v.size() * sizeof(T), tmp);
  }
  // fsync: a checkpoint that is committed (renamed into place) must survive a crash of
  // the machine too, not only of the process.
  if (std::fflush(f.get()) != 0 || ::fsync(::fileno(f.get())) != 0)
    throw std::runtime_error("checkpoint: write failed on " + tmp + ": " + std::strerror(errno));
  f.reset();
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("checkpoint: cannot rename " + tmp + ": " + ec.message());
}

template <class T>
void writeCheckpointManifest(const std::string& dir, const CheckpointSnapshot<T>& snap) {
  if (snap.manifest.empty()) return;
  const std::string mpath = manifestPath(dir, snap.part);
  const std::string tmp = mpath + ".tmp";
  {
    std::ofstream out(tmp);
    out << snap.manifest;
    if (!out.flush()) throw std::runtime_error("checkpoint: write failed on " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, mpath, ec);
  if (ec) throw std::runtime_error("checkpoint: cannot rename " + tmp + ": " + ec.message());
}

template <class T>
void saveCheckpoint(const std::string& dir, ProcessGroup& dp, ParamStore<T>& store,
                    DataParallel<T>& strategy, const TrainState& state, const std::string& part) {
  const CheckpointSnapshot<T> snap = snapshotCheckpoint(dp, store, strategy, state, part);
  writeCheckpointShard(dir, snap);
  dp.allReduceScalar(0.0);  // every shard is on disk
  writeCheckpointManifest(dir, snap);
  dp.allReduceScalar(0.0);  // the manifest exists: the checkpoint is complete
}

template <class T>
TrainState loadCheckpoint(const std::string& dir, ProcessGroup& dp, ParamStore<T>& store,
                          DataParallel<T>& strategy, const std::string& part) {
  const std::string mpath = manifestPath(dir, part);
  const Manifest man = readManifest(mpath);
  if (man.elemSize != sizeof(T))
    throw std::runtime_error("checkpoint: " + mpath + " holds " + std::to_string(man.elemSize) +
                             "-byte elements, the model uses " + std::to_string(sizeof(T)));
  if (man.flatSize != store.flatSize() || man.params.size() != store.size())
    throw std::runtime_error("checkpoint: " + mpath + " describes " + std::to_string(man.params.size()) +
                             " parameters (" + std::to_string(man.flatSize) + " elements), the model has " +
                             std::to_string(store.size()) + " (" + std::to_string(store.flatSize()) + ")");
  for (size_t i = 0; i < store.size(); ++i) {
    const Param<T>& p = store[i];
    const Manifest::P& q = man.params[i];
    if (q.name != p.name || q.offset != p.offset || q.numel != p.numel() || q.full != shapeText(p.fullShape))
      throw std::runtime_error("checkpoint: parameter " + std::to_string(i) + " is '" + q.name + "' " +
                               q.full + " in " + mpath + " but '" + p.name + "' " + shapeText(p.fullShape) +
                               " in the model");
  }
  std::vector<ShardIndex> shards;
  for (int r = 0; r < man.dpSize; ++r) shards.push_back(readIndex(dir + "/" + shardName(part, r, man.dpSize)));
  for (const ShardIndex& s : shards)
    if (s.elemSize != sizeof(T)) throw std::runtime_error("checkpoint: " + s.path + " has the wrong element size");

  const std::vector<StateSlice<T>> want = strategy.stateSlices(false);
  std::vector<File> files;
  for (const ShardIndex& s : shards) files.push_back(openOrThrow(s.path, "rb"));
  for (const StateSlice<T>& w : want) {
    int64_t covered = 0;
    for (size_t fi = 0; fi < shards.size(); ++fi) {
      for (const auto& r : shards[fi].ranges) {
        const int64_t a = std::max(w.flatBegin, r.begin), e = std::min(w.flatBegin + w.n, r.begin + r.n);
        if (a >= e) continue;
        T* dst[3] = {w.w, w.m, w.v};
        for (int k = 0; k < 3; ++k) {
          const long at = r.dataAt + long((k * r.n + (a - r.begin)) * int64_t(sizeof(T)));
          if (std::fseek(files[fi].get(), at, SEEK_SET) != 0)
            throw std::runtime_error("checkpoint: seek failed in " + shards[fi].path);
          readRaw(files[fi].get(), dst[k] + (a - w.flatBegin), size_t(e - a) * sizeof(T), shards[fi].path);
        }
        covered += e - a;
      }
    }
    if (covered != w.n)
      throw std::runtime_error("checkpoint: the shards in " + dir + " cover " + std::to_string(covered) + " of the " +
                               std::to_string(w.n) + " elements at flat offset " + std::to_string(w.flatBegin));
  }
  strategy.optimizer().setStep(shards[0].optStep);
  strategy.afterLoad();
  dp.allReduceScalar(0.0);
  return shards[0].state;
}

template void saveCheckpoint<float>(const std::string&, ProcessGroup&, ParamStore<float>&,
                                    DataParallel<float>&, const TrainState&, const std::string&);
template void saveCheckpoint<double>(const std::string&, ProcessGroup&, ParamStore<double>&,
                                     DataParallel<double>&, const TrainState&, const std::string&);
template CheckpointSnapshot<float> snapshotCheckpoint<float>(const ProcessGroup&, const ParamStore<float>&,
                                                            DataParallel<float>&, const TrainState&,
                                                            const std::string&);
template CheckpointSnapshot<double> snapshotCheckpoint<double>(const ProcessGroup&, const ParamStore<double>&,
                                                              DataParallel<double>&, const TrainState&,
                                                              const std::string&);
template void writeCheckpointShard<float>(const std::string&, const CheckpointSnapshot<float>&);
template void writeCheckpointShard<double>(const std::string&, const CheckpointSnapshot<double>&);
template void writeCheckpointManifest<float>(const std::string&, const CheckpointSnapshot<float>&);
template void writeCheckpointManifest<double>(const std::string&, const CheckpointSnapshot<double>&);
template TrainState loadCheckpoint<float>(const std::string&, ProcessGroup&, ParamStore<float>&,
                                          DataParallel<float>&, const std::string&);
template TrainState loadCheckpoint<double>(const std::string&, ProcessGroup&, ParamStore<double>&,
                                           DataParallel<double>&, const std::string&);

}  // namespace train
}  // namespace braid
