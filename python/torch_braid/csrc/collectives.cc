// torch_braid: each c10d collective as a Batch of Braid calls.
//
// Data-moving collectives (broadcast, all-gather, gather, scatter, all-to-all, send/recv)
// move bytes, so every dtype works. Reductions use NCCL's types and ops where there is
// one; bitwise ops and dtypes NCCL cannot reduce (int16, uint16, complex MIN/MAX aside)
// gather every rank's data and fold it locally with torch. Non-contiguous tensors are
// staged through contiguous copies.
#include "api.h"

// torch's name for the PREMUL_SUM factor (setup.py reads it from torch's headers).
#ifndef BRAID_TORCH_PREMUL_SUPPLEMENT
#define BRAID_TORCH_PREMUL_SUPPLEMENT PreMulSumSupplement
#endif
#include "process_group.h"

#include <c10/util/Exception.h>

#ifdef BRAID_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace torch_braid {

namespace {

using RedOpType = c10d::ReduceOp::RedOpType;

/// How one reduction runs: an NCCL op (maybe a PreMulSum made per launch), or a fold.
struct Reduction {
  bool fold = false;
  ncclDataType_t type = ncclNumTypes;
  ncclRedOp_t op = ncclSum;
  bool preMulSum = false;
  at::Tensor scalar;  // PreMulSum factor, in the tensor's dtype (host or device)
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  c10d::ReduceOp torchOp;
};

Reduction planReduction(const c10d::ReduceOp& op, const at::Tensor& t, const char* call) {
  Reduction r;
  r.torchOp = op;
  const RedOpType kind = op.op_;
  TORCH_CHECK(kind != RedOpType::UNUSED, "braid: ", call, ": invalid reduce op");
  if (t.is_complex()) {
    TORCH_CHECK(kind == RedOpType::SUM || kind == RedOpType::AVG ||
                    kind == RedOpType::PREMUL_SUM,
                "braid: ", call, ": complex tensors reduce with SUM, AVG or PREMUL_SUM only");
  }
  const at::Tensor real = t.is_complex() ? at::view_as_real(t) : t;
  r.type = reductionType(real.scalar_type());
  TORCH_CHECK(kind != RedOpType::PREMUL_SUM || at::isFloatingType(real.scalar_type()),
              "braid: ", call, ": PREMUL_SUM needs a floating-point tensor, not ",
              t.scalar_type());
  if (kind == RedOpType::BAND || kind == RedOpType::BOR || kind == RedOpType::BXOR) {
    TORCH_CHECK(!at::isFloatingType(t.scalar_type()) && !t.is_complex(), "braid: ", call,
                ": bitwise reductions need integer or bool tensors, not ", t.scalar_type());
    r.fold = true;
    return r;
  }
  if (r.type == ncclNumTypes) {
    r.fold = true;
    return r;
  }
  if (t.scalar_type() == at::kBool) {
    TORCH_CHECK(kind != RedOpType::AVG && kind != RedOpType::PREMUL_SUM, "braid: ", call,
                ": AVG and PREMUL_SUM are not defined on bool tensors");
    // As in torch's NCCL backend: a sum of bools is their OR, a product their AND.
    r.op = (kind == RedOpType::SUM || kind == RedOpType::MAX) ? ncclMax : ncclMin;
    return r;
  }
  switch (kind) {
    case RedOpType::SUM: r.op = ncclSum; break;
    case RedOpType::PRODUCT: r.op = ncclProd; break;
    case RedOpType::MIN: r.op = ncclMin; break;
    case RedOpType::MAX: r.op = ncclMax; break;
    case RedOpType::AVG: r.op = ncclAvg; break;
    case RedOpType::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::BRAID_TORCH_PREMUL_SUPPLEMENT*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, "braid: ", call, ": PREMUL_SUM without its factor");
      r.preMulSum = true;
      const auto dtype = real.scalar_type();
      if (s->tensor_factor.defined() && s->tensor_factor.is_cuda() && t.is_cuda()) {
        r.scalar = s->tensor_factor.to(t.device(), dtype).reshape({1}).contiguous();
        r.residence = ncclScalarDevice;
      } else {
        double f = s->tensor_factor.defined() ? s->tensor_factor.item<double>()
                                              : s->double_factor;
        r.scalar = at::scalar_tensor(f, at::TensorOptions().dtype(dtype)).reshape({1});
        r.residence = ncclScalarHostImmediate;
      }
      break;
    }
    default: TORCH_CHECK(false, "braid: ", call, ": unsupported reduce op ", int(kind));
  }
  return r;
}

/// The folded result of g (one row per rank) under the torch op; same dtype as rows.
at::Tensor fold(const at::Tensor& g, const c10d::ReduceOp& op, int size) {
  const auto dtype = g.scalar_type();
  switch (op.op_) {
    case RedOpType::SUM: return g.sum(0, false, dtype);
    case RedOpType::PRODUCT: return g.prod(0, false, dtype);
    case RedOpType::MIN: return std::get<0>(g.min(0));
    case RedOpType::MAX: return std::get<0>(g.max(0));
    case RedOpType::AVG: {
      at::Tensor s = g.sum(0, false, dtype);
      return at::isFloatingType(dtype) || at::isComplexType(dtype)
                 ? s.div(size)
                 : s.div(size, "trunc").to(dtype);  // as Braid's integer ncclAvg
    }
    case RedOpType::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::BRAID_TORCH_PREMUL_SUPPLEMENT*>(op.supplement_.get());
      double f = s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
      return g.mul(f).sum(0, false, dtype);
    }
    case RedOpType::BAND:
    case RedOpType::BOR:
    case RedOpType::BXOR: {
      at::Tensor acc = g[0].clone();
      for (int64_t i = 1; i < g.size(0); ++i) {
        if (op.op_ == RedOpType::BAND) acc.bitwise_and_(g[i]);
        else if (op.op_ == RedOpType::BOR) acc.bitwise_or_(g[i]);
        else acc.bitwise_xor_(g[i]);
      }
      return acc;
    }
    default: TORCH_CHECK(false, "braid: unsupported reduce op ", int(op.op_));
  }
}

/// The contiguous tensor NCCL works on for `t`: t itself, or a staging copy filled by a
/// `pre` step (when copyIn: when the batch runs, so it sees what earlier queued ops wrote)
/// and copied back by a `post` step (when copyBack).
at::Tensor staged(Batch& b, const at::Tensor& t, bool copyBack, bool copyIn = true) {
  if (t.is_contiguous()) return t;
  at::Tensor s = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  b.keep.push_back(s);
  at::Tensor user = t;
  if (copyIn) b.pre.push_back([s, user]() mutable { s.copy_(user); });
  if (copyBack) b.post.push_back([user, s]() mutable { user.copy_(s); });
  return s;
}

/// One contiguous buffer holding `parts` back to back, filled by a `pre` step.
at::Tensor concatenated(Batch& b, const std::vector<at::Tensor>& parts) {
  int64_t n = 0;
  for (const auto& p : parts) n += p.numel();
  at::Tensor flat = at::empty({n}, parts.at(0).options().memory_format(at::MemoryFormat::Contiguous));
  b.keep.push_back(flat);
  b.pre.push_back([flat, parts]() mutable {
    int64_t off = 0;
    for (auto& p : parts) {
      flat.narrow(0, off, p.numel()).view(p.sizes()).copy_(p);
      off += p.numel();
    }
  });
  return flat;
}

/// Runs `call(op)` with the reduction's NCCL op (a PreMulSum op made for this launch).
ncclResult_t withOp(LaunchContext& c, const Reduction& r,
                    const std::function<ncclResult_t(ncclRedOp_t)>& call) {
  if (!r.preMulSum) return call(r.op);
  ncclRedOp_t op;
  ncclResult_t res = nccl().redOpCreatePreMulSum(&op, r.scalar.data_ptr(), r.type, r.residence,
                                                 c.comm);
  if (res != ncclSuccess) return res;
  ncclComm_t comm = c.comm;
  c.cleanup.push_back([op, comm] { nccl().redOpDestroy(op, comm); });
  return call(op);
}

/// A send or receive of `bytes` at `ptr` (memory the batch keeps) with `peer`.
void addSend(Batch& b, const void* ptr, size_t bytes, int peer) {
  b.launches.push_back({"ncclSend", [ptr, bytes, peer](LaunchContext& c) {
                          return nccl().send(ptr, bytes, ncclUint8, peer, c.comm, c.stream);
                        }});
}
void addRecv(Batch& b, void* ptr, size_t bytes, int peer) {
  b.launches.push_back({"ncclRecv", [ptr, bytes, peer](LaunchContext& c) {
                          return nccl().recv(ptr, bytes, ncclUint8, peer, c.comm, c.stream);
                        }});
}

at::Tensor realView(const at::Tensor& t) { return t.is_complex() ? at::view_as_real(t) : t; }

void checkSameShape(const at::Tensor& a, const at::Tensor& b, const char* call) {
  TORCH_CHECK(a.numel() == b.numel() && a.scalar_type() == b.scalar_type(), "braid: ", call,
              ": tensors differ (", a.sizes(), " ", a.scalar_type(), " and ", b.sizes(), " ",
              b.scalar_type(), ")");
}

}  // namespace

// ---- building blocks -------------------------------------------------------------------

void ProcessGroupBraid::addAllreduce(Batch& b, const at::Tensor& t, const c10d::ReduceOp& op) {
  Reduction r = planReduction(op, t, "allreduce");
  if (r.fold) return addFoldAllreduce(b, t, op, -1);
  at::Tensor buf = realView(staged(b, t, true));
  b.keep.push_back(buf);
  if (r.scalar.defined()) b.keep.push_back(r.scalar);
  b.launches.push_back({"ncclAllReduce", [buf, r](LaunchContext& c) {
                          return withOp(c, r, [&](ncclRedOp_t op) {
                            return nccl().allReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                                    r.type, op, c.comm, c.stream);
                          });
                        }});
}

void ProcessGroupBraid::addFoldAllreduce(Batch& b, const at::Tensor& t,
                                         const c10d::ReduceOp& op, int root) {
  at::Tensor in = staged(b, t, false);
  std::vector<int64_t> shape{getSize()};
  shape.insert(shape.end(), in.sizes().begin(), in.sizes().end());
  at::Tensor g = at::empty(shape, in.options().memory_format(at::MemoryFormat::Contiguous));
  b.keep.push_back(in);
  b.keep.push_back(g);
  const size_t bytes = nbytes(in);
  b.launches.push_back({"ncclAllGather", [in, g, bytes](LaunchContext& c) {
                          return nccl().allGather(in.data_ptr(), g.data_ptr(), bytes, ncclUint8,
                                                  c.comm, c.stream);
                        }});
  const int size = getSize(), me = getRank();
  at::Tensor dst = t;
  b.post.push_back([dst, g, op, size, root, me]() mutable {
    if (root < 0 || root == me) dst.copy_(fold(g, op, size));
  });
}

void ProcessGroupBraid::addAllgather(Batch& b, const at::Tensor& out, const at::Tensor& in) {
  TORCH_CHECK(out.numel() == in.numel() * getSize() && out.scalar_type() == in.scalar_type(),
              "braid: all_gather_into_tensor: the output must hold world_size (", getSize(),
              ") times the input's ", in.numel(), " elements of ", in.scalar_type(), ", not ",
              out.numel(), " of ", out.scalar_type());
  at::Tensor src = staged(b, in, false), dst = staged(b, out, true, false);
  b.keep.push_back(src);
  b.keep.push_back(dst);
  const size_t bytes = nbytes(src);
  b.launches.push_back({"ncclAllGather", [src, dst, bytes](LaunchContext& c) {
                          return nccl().allGather(src.data_ptr(), dst.data_ptr(), bytes,
                                                  ncclUint8, c.comm, c.stream);
                        }});
}

void ProcessGroupBraid::addReduceScatter(Batch& b, const at::Tensor& out, const at::Tensor& in,
                                         const c10d::ReduceOp& op) {
  TORCH_CHECK(in.numel() == out.numel() * getSize() && out.scalar_type() == in.scalar_type(),
              "braid: reduce_scatter_tensor: the input must hold world_size (", getSize(),
              ") times the output's ", out.numel(), " elements of ", out.scalar_type(),
              ", not ", in.numel(), " of ", in.scalar_type());
  Reduction r = planReduction(op, in, "reduce_scatter");
  at::Tensor src = staged(b, in, false);
  b.keep.push_back(src);
  if (r.fold) {
    // Each rank receives every rank's chunk for it (an all-to-all), then folds them.
    at::Tensor g = at::empty({getSize(), out.numel()}, src.options());
    b.keep.push_back(g);
    const size_t chunk = nbytes(out);
    b.launches.push_back({"ncclAlltoAll", [src, g, chunk](LaunchContext& c) {
                            return nccl().alltoAll(src.data_ptr(), g.data_ptr(), chunk, ncclUint8,
                                                   c.comm, c.stream);
                          }});
    at::Tensor dst = out;
    const int size = getSize();
    b.post.push_back([dst, g, op, size]() mutable {
      dst.copy_(fold(g, op, size).view(dst.sizes()));
    });
    return;
  }
  at::Tensor dst = staged(b, out, true, false);
  at::Tensor s = realView(src), d = realView(dst);
  b.keep.push_back(dst);
  if (r.scalar.defined()) b.keep.push_back(r.scalar);
  b.launches.push_back({"ncclReduceScatter", [s, d, r](LaunchContext& c) {
                          return withOp(c, r, [&](ncclRedOp_t op) {
                            return nccl().reduceScatter(s.data_ptr(), d.data_ptr(), d.numel(),
                                                        r.type, op, c.comm, c.stream);
                          });
                        }});
}

// ---- the c10d calls --------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "braid: allreduce takes one tensor per process, not ",
              tensors.size());
  Batch b = newBatch("allreduce", c10d::OpType::ALLREDUCE, deviceOf(tensors, "allreduce"),
                     opts.timeout);
  addAllreduce(b, tensors[0], opts.reduceOp);
  b.outputs = tensors;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  Batch b = newBatch("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED,
                     deviceOf(tensors, "allreduce_coalesced"), opts.timeout);
  for (auto& t : tensors) addAllreduce(b, t, opts.reduceOp);
  b.outputs = tensors;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "braid: broadcast takes one tensor per process");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "braid: broadcast root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  Batch b = newBatch("broadcast", c10d::OpType::BROADCAST, deviceOf(tensors, "broadcast"),
                     opts.timeout);
  at::Tensor buf = staged(b, tensors[0], true);
  b.keep.push_back(buf);
  const int root = int(opts.rootRank);
  const size_t bytes = nbytes(buf);
  b.launches.push_back({"ncclBroadcast", [buf, root, bytes](LaunchContext& c) {
                          return nccl().broadcast(buf.data_ptr(), buf.data_ptr(), bytes,
                                                  ncclUint8, root, c.comm, c.stream);
                        }});
  b.outputs = tensors;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "braid: reduce takes one tensor per process");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "braid: reduce root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  Batch b = newBatch("reduce", c10d::OpType::REDUCE, deviceOf(tensors, "reduce"), opts.timeout);
  const at::Tensor& t = tensors[0];
  const int root = int(opts.rootRank);
  Reduction r = planReduction(opts.reduceOp, t, "reduce");
  if (r.fold) {
    addFoldAllreduce(b, t, opts.reduceOp, root);
  } else {
    at::Tensor buf = realView(staged(b, t, getRank() == root));
    b.keep.push_back(buf);
    if (r.scalar.defined()) b.keep.push_back(r.scalar);
    b.launches.push_back({"ncclReduce", [buf, r, root](LaunchContext& c) {
                            return withOp(c, r, [&](ncclRedOp_t op) {
                              return nccl().reduce(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                                   r.type, op, root, c.comm, c.stream);
                            });
                          }});
  }
  b.outputs = tensors;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
              "braid: allgather takes one input tensor and one output list per process");
  auto& outs = outputs[0];
  TORCH_CHECK(int(outs.size()) == getSize(), "braid: allgather: the output list has ",
              outs.size(), " tensors, the group ", getSize(), " ranks");
  for (auto& o : outs) checkSameShape(o, inputs[0], "allgather");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outs.begin(), outs.end());
  Batch b = newBatch("allgather", c10d::OpType::ALLGATHER, deviceOf(all, "allgather"),
                     opts.timeout);
  at::Tensor flat = at::empty({getSize() * inputs[0].numel()}, inputs[0].options());
  addAllgather(b, flat, staged(b, inputs[0], false).view({-1}));
  b.post.push_back([flat, outs]() mutable {
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, int64_t(i) * outs[i].numel(), outs[i].numel())
                        .view(outs[i].sizes()));
  });
  b.outputs = outs;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  Batch b = newBatch("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE,
                     deviceOf({output, input}, "all_gather_into_tensor"), opts.timeout);
  addAllgather(b, output, input);
  b.outputs = {output};
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputLists.size() == inputs.size(),
              "braid: allgather_coalesced: one output list per input");
  std::vector<at::Tensor> all = inputs;
  for (auto& l : outputLists) all.insert(all.end(), l.begin(), l.end());
  Batch b = newBatch("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED,
                     deviceOf(all, "allgather_coalesced"), opts.timeout);
  for (size_t k = 0; k < inputs.size(); ++k) {
    auto& outs = outputLists[k];
    TORCH_CHECK(int(outs.size()) == getSize(), "braid: allgather_coalesced: an output list of ",
                outs.size(), " tensors for a group of ", getSize());
    at::Tensor flat = at::empty({getSize() * inputs[k].numel()}, inputs[k].options());
    addAllgather(b, flat, staged(b, inputs[k], false).view({-1}));
    b.post.push_back([flat, outs]() mutable {
      for (size_t i = 0; i < outs.size(); ++i)
        outs[i].copy_(flat.narrow(0, int64_t(i) * outs[i].numel(), outs[i].numel())
                          .view(outs[i].sizes()));
    });
    b.outputs.insert(b.outputs.end(), outs.begin(), outs.end());
  }
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "braid: allgather_into_tensor_coalesced: one "
              "output per input");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  Batch b = newBatch("allgather_into_tensor_coalesced", c10d::OpType::COALESCED,
                     deviceOf(all, "allgather_into_tensor_coalesced"), opts.timeout);
  for (size_t k = 0; k < inputs.size(); ++k) addAllgather(b, outputs[k], inputs[k]);
  b.outputs = outputs;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "braid: gather takes one input tensor per process");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "braid: gather root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  const int root = int(opts.rootRank);
  const bool isRoot = getRank() == root;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1 && int(outputs[0].size()) == getSize(),
                "braid: gather: the root needs one output list of ", getSize(), " tensors");
    for (auto& o : outputs[0]) checkSameShape(o, inputs[0], "gather");
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "braid: gather: only the root passes output tensors");
  }
  std::vector<at::Tensor> all = inputs;
  if (isRoot) all.insert(all.end(), outputs[0].begin(), outputs[0].end());
  Batch b = newBatch("gather", c10d::OpType::GATHER, deviceOf(all, "gather"), opts.timeout);
  at::Tensor src = staged(b, inputs[0], false);
  at::Tensor flat = isRoot ? at::empty({getSize() * src.numel()}, src.options()) : at::Tensor();
  b.keep.push_back(src);
  if (isRoot) b.keep.push_back(flat);
  const size_t bytes = nbytes(src);
  b.launches.push_back({"ncclGather", [src, flat, bytes, root](LaunchContext& c) {
                          return nccl().gather(src.data_ptr(),
                                               flat.defined() ? flat.data_ptr() : nullptr, bytes,
                                               ncclUint8, root, c.comm, c.stream);
                        }});
  if (isRoot) {
    auto outs = outputs[0];
    b.post.push_back([flat, outs]() mutable {
      for (size_t i = 0; i < outs.size(); ++i)
        outs[i].copy_(flat.narrow(0, int64_t(i) * outs[i].numel(), outs[i].numel())
                          .view(outs[i].sizes()));
    });
    b.outputs = outs;
  }
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "braid: scatter takes one output tensor per process");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "braid: scatter root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  const int root = int(opts.rootRank);
  const bool isRoot = getRank() == root;
  at::Tensor flat;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1 && int(inputs[0].size()) == getSize(),
                "braid: scatter: the root needs one input list of ", getSize(), " tensors");
    for (auto& i : inputs[0]) checkSameShape(i, outputs[0], "scatter");
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "braid: scatter: only the root passes input tensors");
  }
  std::vector<at::Tensor> all = outputs;
  if (isRoot) all.insert(all.end(), inputs[0].begin(), inputs[0].end());
  Batch b = newBatch("scatter", c10d::OpType::SCATTER, deviceOf(all, "scatter"), opts.timeout);
  if (isRoot) flat = concatenated(b, inputs[0]);
  at::Tensor dst = staged(b, outputs[0], true, false);
  b.keep.push_back(dst);
  if (flat.defined()) b.keep.push_back(flat);
  const size_t bytes = nbytes(dst);
  b.launches.push_back({"ncclScatter", [flat, dst, bytes, root](LaunchContext& c) {
                          return nccl().scatter(flat.defined() ? flat.data_ptr() : nullptr,
                                                dst.data_ptr(), bytes, ncclUint8, root, c.comm,
                                                c.stream);
                        }});
  b.outputs = outputs;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1 && int(inputs[0].size()) == getSize(),
              "braid: reduce_scatter takes one output and a list of ", getSize(),
              " inputs per process");
  for (auto& i : inputs[0]) checkSameShape(i, outputs[0], "reduce_scatter");
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs[0].begin(), inputs[0].end());
  Batch b = newBatch("reduce_scatter", c10d::OpType::REDUCE_SCATTER,
                     deviceOf(all, "reduce_scatter"), opts.timeout);
  addReduceScatter(b, outputs[0], concatenated(b, inputs[0]), opts.reduceOp);
  b.outputs = outputs;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  Batch b = newBatch("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE,
                     deviceOf({output, input}, "reduce_scatter_tensor"), opts.timeout);
  addReduceScatter(b, output, input, opts.reduceOp);
  b.outputs = {output};
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "braid: reduce_scatter_tensor_coalesced: one "
              "output per input");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  Batch b = newBatch("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED,
                     deviceOf(all, "reduce_scatter_tensor_coalesced"), opts.timeout);
  for (size_t k = 0; k < inputs.size(); ++k)
    addReduceScatter(b, outputs[k], inputs[k], opts.reduceOp);
  b.outputs = outputs;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "braid: all_to_all_single: input ",
              input.scalar_type(), " and output ", output.scalar_type(), " differ");
  Batch b = newBatch("all_to_all_single", c10d::OpType::ALLTOALL_BASE,
                     deviceOf({output, input}, "all_to_all_single"), opts.timeout);
  const int n = getSize();
  at::Tensor src = staged(b, input, false), dst = staged(b, output, true, false);
  b.keep.push_back(src);
  b.keep.push_back(dst);
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(src.numel() % n == 0 && src.numel() == dst.numel(), "braid: all_to_all_single: "
                "without splits, input and output must be equal and divisible by ", n);
    const size_t chunk = nbytes(src) / n;
    b.launches.push_back({"ncclAlltoAll", [src, dst, chunk](LaunchContext& c) {
                            return nccl().alltoAll(src.data_ptr(), dst.data_ptr(), chunk,
                                                   ncclUint8, c.comm, c.stream);
                          }});
  } else {
    // Splits count rows of dim 0 (an empty list means equal parts).
    auto rows = [n](const at::Tensor& t, std::vector<int64_t> s, const char* what) {
      if (s.empty()) {
        TORCH_CHECK(t.dim() > 0 && t.size(0) % n == 0, "braid: all_to_all_single: ", what,
                    " has ", t.dim() ? t.size(0) : 0, " rows, not divisible by ", n);
        s.assign(n, t.size(0) / n);
      }
      TORCH_CHECK(int(s.size()) == n, "braid: all_to_all_single: ", what, " splits have ",
                  s.size(), " entries for ", n, " ranks");
      int64_t total = 0;
      for (int64_t v : s) {
        TORCH_CHECK(v >= 0, "braid: all_to_all_single: a negative ", what, " split (", v, ")");
        total += v;
      }
      TORCH_CHECK(t.dim() > 0 && total == t.size(0), "braid: all_to_all_single: ", what,
                  " splits add up to ", total, " rows, the tensor has ",
                  t.dim() ? t.size(0) : 0);
      return s;
    };
    auto in = rows(src, inputSplits, "input"), out = rows(dst, outputSplits, "output");
    const size_t inRow = src.size(0) ? nbytes(src) / src.size(0) : 0;
    const size_t outRow = dst.size(0) ? nbytes(dst) / dst.size(0) : 0;
    int64_t inOff = 0, outOff = 0;
    for (int p = 0; p < n; ++p) {
      char* s = static_cast<char*>(src.data_ptr()) + inOff * inRow;
      char* d = static_cast<char*>(dst.data_ptr()) + outOff * outRow;
      size_t sb = in[p] * inRow, rb = out[p] * outRow;
      if (sb) addSend(b, s, sb, p);
      if (rb) addRecv(b, d, rb, p);
      inOff += in[p];
      outOff += out[p];
    }
  }
  b.outputs = {output};
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  const int n = getSize();
  TORCH_CHECK(int(outputs.size()) == n && int(inputs.size()) == n, "braid: all_to_all takes ",
              n, " input and ", n, " output tensors");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  Batch b = newBatch("all_to_all", c10d::OpType::ALLTOALL, deviceOf(all, "all_to_all"),
                     opts.timeout);
  for (int p = 0; p < n; ++p) {
    at::Tensor s = staged(b, inputs[p], false), d = staged(b, outputs[p], true, false);
    b.keep.push_back(s);
    b.keep.push_back(d);
    const size_t sb = nbytes(s), rb = nbytes(d);
    if (sb) addSend(b, s.data_ptr(), sb, p);
    if (rb) addRecv(b, d.data_ptr(), rb, p);
  }
  b.outputs = outputs;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::send(std::vector<at::Tensor>& tensors,
                                                       int dst, int /*tag*/) {
  TORCH_CHECK(tensors.size() == 1, "braid: send takes one tensor");
  TORCH_CHECK(dst >= 0 && dst < getSize(), "braid: send to rank ", dst, " (group of ",
              getSize(), ")");
  TORCH_CHECK(dst != getRank() || coalescing_, "braid: a send to this rank itself (", dst,
              ") needs its matching recv in the same batch_isend_irecv");
  Batch b = newBatch("send", c10d::OpType::SEND, deviceOf(tensors, "send"), c10d::kUnsetTimeout);
  at::Tensor s = staged(b, tensors[0], false);
  b.keep.push_back(s);
  addSend(b, s.data_ptr(), nbytes(s), dst);
  b.outputs = tensors;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::recv(std::vector<at::Tensor>& tensors,
                                                       int src, int /*tag*/) {
  TORCH_CHECK(tensors.size() == 1, "braid: recv takes one tensor");
  TORCH_CHECK(src >= 0 && src < getSize(), "braid: recv from rank ", src, " (group of ",
              getSize(), ")");
  TORCH_CHECK(src != getRank() || coalescing_, "braid: a recv from this rank itself (", src,
              ") needs its matching send in the same batch_isend_irecv");
  Batch b = newBatch("recv", c10d::OpType::RECV, deviceOf(tensors, "recv"), c10d::kUnsetTimeout);
  at::Tensor d = staged(b, tensors[0], true, false);
  b.keep.push_back(d);
  addRecv(b, d.data_ptr(), nbytes(d), src);
  b.outputs = tensors;
  return submit(std::move(b));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::barrier(const c10d::BarrierOptions& opts) {
  // On the host communicator, behind all queued host work; CUDA communicators are
  // drained first (their streams synchronized) so the barrier covers device work too.
#ifdef BRAID_TORCH_CUDA
  for (auto& [dev, comm] : cudaComms_) {
    if (!comm->aborted()) at::cuda::getCurrentCUDAStream(dev).synchronize();
  }
#endif
  Batch b = newBatch("barrier", c10d::OpType::BARRIER, at::Device(at::kCPU), opts.timeout);
  at::Tensor one = at::zeros({1}, at::kByte);
  addAllreduce(b, one, c10d::ReduceOp(c10d::ReduceOp::SUM));
  return submit(std::move(b));
}

}  // namespace torch_braid
