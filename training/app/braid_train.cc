// braid-train: trains the GPT-style character model through Braid on any DP x TP x PP
// layout. One process per rank; started by braidrun (torchrun-style environment),
// mpirun (Open MPI) or srun (Slurm), or alone as a single rank:
//
//   braidrun -n 4 -- braid-train --dp 2 --tp 2 --steps 300
//   mpirun -np 4 braid-train --tp 2 --pp 2 --microbatches 4 --schedule 1f1b
//
// Rank 0 prints the progress (a bar on a terminal, plain lines otherwise), writes the
// CSV / JSON logs and the PNG plot (training/app/loss_plot.h, libpng, no plotting library
// needed; training/app/plot_loss.py draws a matplotlib version from the CSV).
// Flags: braid-train --help (the command line is read with CLI11: src/tools/cli.h).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/tools/cli.h"
#include "training/app/loss_plot.h"
#include "training/checkpoint/async_checkpoint.h"
#include "training/data/markov.h"
#include "training/data/text_dataset.h"
#include "training/dist/launch.h"
#include "training/parallel/elastic.h"
#include "training/parallel/trainer.h"

namespace bt = braid::train;

namespace {

struct Options {
  // model
  int64_t width = 64, layers = 2, heads = 4, context = 64;
  // data
  std::string data;  // empty: tinyshakespeare when found, else a Markov corpus
  int64_t batch = 16, steps = 200, evalEvery = 50, evalBatches = 4;
  // layout
  int dp = 1, tp = 1, pp = 1, micros = 1;
  std::string dpMode = "ddp", schedule = "1f1b";
  // optimizer
  double lr = 3e-3, weightDecay = 0.1, clip = 1.0;
  uint64_t seed = 1;
  // output
  std::string logCsv, logJson, plot, save, load;
  int64_t printEvery = 0;  // plain-line progress every N steps (0: ~20 lines per run)
  int64_t bucketKib = 0;   // DDP / ZeRO-1/2 bucket size (0: 1 MiB first, 25 MiB cap)
  bool quiet = false;
  bool noReshard = false, noPrefetch = false;  // zero3
  // periodic checkpoints and elastic training
  std::string checkpointDir;
  int64_t checkpointEvery = 0, checkpointKeep = 2;
  bool syncCheckpoint = false, elastic = false;
  int64_t heartbeatMs = 100, deadMs = 3000, agreeMs = 120000;
  int64_t killRank = -1, killStep = -1;  // testing: that rank SIGKILLs itself at that step
};

/// Declares the flags on `app`, storing into *o (its values are the defaults).
void declareFlags(braid::cli::App& app, Options* o) {
  auto count = [&](const char* name, int64_t* v, const char* help, int64_t lo) {
    return app.add_option(name, *v, help)->check(braid::cli::atLeast(lo))->type_name("N");
  };
  auto text = [&](const char* name, std::string* v, const char* help, const char* type) {
    return app.add_option(name, *v, help)->type_name(type);
  };
  auto real = [&](const char* name, double* v, const char* help) {
    return app.add_option(name, *v, help)->type_name("X");
  };
  // model
  count("--width", &o->width, "embedding width (default 64)", 1)->group("model");
  count("--layers", &o->layers, "transformer blocks (default 2)", 1)->group("model");
  count("--heads", &o->heads, "attention heads, divisible by --tp (default 4)", 1)->group("model");
  count("--context", &o->context, "sequence length (default 64)", 1)->group("model");
  // data
  const char* kData = "data";
  text("--data", &o->data,
       "text file (default: ../shared/data/tinyshakespeare.txt near the repository when it "
       "exists, else a generated Markov corpus)",
       "PATH")
      ->group(kData);
  count("--batch", &o->batch, "sequences per global batch, divisible by dp*microbatches (16)", 1)
      ->group(kData);
  count("--steps", &o->steps, "optimizer steps in all (default 200; with --load: up to N)", 0)
      ->group(kData);
  count("--eval-every", &o->evalEvery,
        "validation every N steps and at the end (default 50; 0: at the end)", 0)
      ->group(kData);
  count("--eval-batches", &o->evalBatches, "validation batches of B sequences (default 4)", 1)
      ->group(kData);
  // layout
  const char* kLayout = "parallel layout (dp*tp*pp = number of ranks)";
  for (auto [name, v] : {std::pair{"--dp", &o->dp}, {"--tp", &o->tp}, {"--pp", &o->pp}})
    app.add_option(name, *v, "ranks along this axis (default 1)")
        ->check(braid::cli::range(1, 1 << 20))
        ->type_name("N")
        ->group(kLayout);
  text("--dp-mode", &o->dpMode, "ddp | zero1 | zero2 | zero3 (= fsdp) (default ddp)", "MODE")
      ->check(braid::cli::readableBy<bt::DpMode>(bt::parseDpMode,
                                                 "ddp, zero1, zero2, zero3 or fsdp"))
      ->group(kLayout);
  app.add_option("--microbatches", o->micros, "per step and data-parallel replica (default 1)")
      ->check(braid::cli::range(1, 1 << 20))
      ->type_name("M")
      ->group(kLayout);
  text("--schedule", &o->schedule, "gpipe | 1f1b (default 1f1b)", "S")
      ->check(braid::cli::readableBy<bt::Schedule>(bt::parseSchedule, "gpipe or 1f1b"))
      ->group(kLayout);
  count("--bucket-kib", &o->bucketKib,
        "gradient bucket size for ddp/zero1/zero2 (default: 1 MiB for the first bucket, 25 "
        "MiB after; small models want ~64)",
        0)
      ->group(kLayout);
  app.add_flag("--no-reshard", o->noReshard,
               "zero3: keep a layer's gathered parameters from its forward to its backward "
               "(default: free them after forward)")
      ->group(kLayout);
  app.add_flag("--no-prefetch", o->noPrefetch, "zero3: no prefetch of the next layer's all-gather")
      ->group(kLayout);
  // optimizer
  real("--lr", &o->lr, "learning rate (default 3e-3)")->group("optimizer");
  real("--weight-decay", &o->weightDecay, "AdamW weight decay (default 0.1)")->group("optimizer");
  real("--clip", &o->clip, "gradient norm clip (default 1.0; 0 disables)")->group("optimizer");
  app.add_option("--seed", o->seed, "random seed (default 1)")->type_name("N")->group("optimizer");
  // output
  const char* kOut = "output (rank 0)";
  text("--log-csv", &o->logCsv,
       "CSV log (with %r in it: every rank writes its own log, %r = its first rank)", "FILE")
      ->group(kOut);
  text("--log-json", &o->logJson, "JSON log", "FILE")->group(kOut);
  text("--plot", &o->plot, "loss plot", "FILE.png")->group(kOut);
  text("--save", &o->save, "sharded checkpoint at the end", "DIR")->group(kOut);
  text("--load", &o->load, "resume from a checkpoint (same model, tp and pp; any dp)", "DIR")
      ->group(kOut);
  count("--print-every", &o->printEvery, "plain progress lines every N steps (no terminal)", 0)
      ->group(kOut);
  app.add_flag("--quiet", o->quiet, "only the summary")->group(kOut);
  // periodic checkpoints and elastic training
  const char* kElastic = "periodic checkpoints and elastic training";
  text("--checkpoint-dir", &o->checkpointDir,
       "checkpoints D/step-NNNNNNNN every --checkpoint-every steps (a directory is renamed "
       "into place once complete); an existing complete one is resumed from at start (unless "
       "--load)",
       "D")
      ->group(kElastic);
  count("--checkpoint-every", &o->checkpointEvery, "(default 0: none; with --elastic 10)", 0)
      ->group(kElastic);
  count("--checkpoint-keep", &o->checkpointKeep, "complete checkpoints kept (default 2; 0: all)",
        0)
      ->group(kElastic);
  app.add_flag("--sync-checkpoint", o->syncCheckpoint,
               "write in the training thread (default: a background thread writes a copy "
               "taken at the step boundary)")
      ->group(kElastic);
  app.add_flag("--elastic", o->elastic,
               "survive dead ranks (dp only, tp = pp = 1): the survivors agree on who failed "
               "(via D), shrink the communicator, reload the newest checkpoint for the smaller "
               "dp and go on; needs --checkpoint-dir")
      ->group(kElastic);
  count("--elastic-heartbeat-ms", &o->heartbeatMs, "heartbeat period (default 100)", 1)
      ->group(kElastic);
  count("--elastic-dead-ms", &o->deadMs,
        "a rank whose heartbeat file in D has not changed for N ms is dead (same machine: as "
        "soon as its process is gone) (default 3000)",
        1)
      ->group(kElastic);
  count("--elastic-agree-ms", &o->agreeMs,
        "a rank that has not reported within N ms of a failure is excluded as hung (default "
        "120000)",
        1)
      ->group(kElastic);
  count("--kill-rank", &o->killRank,
        "testing: rank R SIGKILLs itself as step --kill-at-step starts", -1)
      ->group(kElastic);
  count("--kill-at-step", &o->killStep, "testing: the step of --kill-rank", -1)->group(kElastic);
}

/// Parses argv into *o; false with *exitCode when braid-train should end (--help, errors).
bool parseArgs(int argc, char** argv, Options* o, int* exitCode) {
  braid::cli::App app("Trains the GPT-style character model through Braid on any DP x TP x PP "
                      "layout; one process per rank (braidrun -n N, mpirun, srun).",
                      "braid-train");
  declareFlags(app, o);
  return app.parseCommandLine(argc, argv, exitCode);
}

bool fileExists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dirName(const std::string& p) {
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? "." : s == 0 ? "/" : p.substr(0, s);
}

/// The directories from here upwards: the executable's folder and the current one.
std::vector<std::string> searchRoots() {
  std::vector<std::string> roots;
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  for (std::string start : {n > 0 ? std::string(buf, size_t(n)) + "/x" : std::string(),
                            std::string(::getcwd(buf, sizeof(buf)) ? buf : ".") + "/x"}) {
    if (start.empty()) continue;
    for (std::string d = dirName(start);; d = dirName(d)) {
      roots.push_back(d);
      if (d == "/" || d == ".") break;
    }
  }
  return roots;
}

/// `rel` under the first root that has it ("" if none).
std::string findUpwards(const std::string& rel) {
  for (const std::string& r : searchRoots()) {
    const std::string p = (r == "/" ? "" : r) + "/" + rel;
    if (fileExists(p)) return p;
  }
  return "";
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

/// The JSON log's document (keys in the order written); NaN is written as null.
using Json = nlohmann::ordered_json;

struct Row {
  bt::StepStats s;
  double val = NAN;
};

/// Rank 0's view of the run: progress output and logs.
class Reporter {
 public:
  Reporter(const Options& o, bool tty) : o_(o), tty_(tty && !o.quiet) {}

  /// Records a step; prints it when `print` (rank 0).
  void step(const Row& r, int64_t total, bool dpComm, bool print) {
    rows_.push_back(r);
    if (std::isfinite(r.val)) lastVal_ = r.val;
    if (o_.quiet || !print) return;
    const std::string hidden = dpComm ? fmt("%.0f%%", 100 * r.s.commHidden) : "-";
    if (tty_) {
      const int width = 28;
      const int filled = int(double(width) * double(r.s.step) / double(std::max<int64_t>(total, 1)));
      std::string bar(size_t(filled), '#');
      bar.resize(size_t(width), '.');
      std::printf("\r[%s] %lld/%lld loss %.4f val %s %s tok/s hidden %s ", bar.c_str(),
                  (long long)r.s.step, (long long)total, r.s.loss,
                  std::isfinite(lastVal_) ? fmt("%.4f", lastVal_).c_str() : "-",
                  human(r.s.tokensPerSec).c_str(), hidden.c_str());
      if (std::isfinite(r.val) || r.s.step == total) std::printf("\n");
      std::fflush(stdout);
    } else {
      const int64_t every = o_.printEvery > 0 ? o_.printEvery : std::max<int64_t>(1, total / 20);
      if (std::isfinite(r.val) || r.s.step % every == 0 || r.s.step == total || r.s.step == 1) {
        std::printf("step %5lld/%lld  loss %.4f  val %s  %s tok/s  comm hidden %s  grad norm %.3f\n",
                    (long long)r.s.step, (long long)total, r.s.loss,
                    std::isfinite(r.val) ? fmt("%.4f", r.val).c_str() : "  -   ",
                    human(r.s.tokensPerSec).c_str(), hidden.c_str(), r.s.gradNorm);
        std::fflush(stdout);
      }
    }
  }

  void writeCsv(const std::string& path) const {
    std::ofstream f(path);
    if (!f) throw std::runtime_error("cannot write " + path);
    f << "step,loss,val_loss,tokens_per_s,comm_hidden,comm_s,bubble,bubble_theory,grad_norm,step_s\n";
    for (const Row& r : rows_) {
      f << r.s.step << ',' << fmt("%.6f", r.s.loss) << ','
        << (std::isfinite(r.val) ? fmt("%.6f", r.val) : "") << ','
        << fmt("%.1f", r.s.tokensPerSec) << ',' << fmt("%.4f", r.s.commHidden) << ','
        << fmt("%.6f", r.s.commSeconds) << ',' << fmt("%.4f", r.s.bubble) << ','
        << fmt("%.4f", r.s.bubbleTheory) << ',' << fmt("%.4f", r.s.gradNorm) << ','
        << fmt("%.5f", r.s.seconds) << '\n';
    }
  }

  /// Writes `doc` (the run's summary) with every step added as "steps".
  void writeJson(const std::string& path, Json doc) const {
    Json steps = Json::array();
    for (const Row& r : rows_) {
      Json o;
      o["step"] = r.s.step;
      o["loss"] = r.s.loss;
      o["val_loss"] = r.val;
      o["tokens_per_s"] = r.s.tokensPerSec;
      o["comm_hidden"] = r.s.commHidden;
      o["bubble"] = r.s.bubble;
      o["grad_norm"] = r.s.gradNorm;
      o["step_s"] = r.s.seconds;
      steps.push_back(std::move(o));
    }
    doc["steps"] = std::move(steps);
    std::ofstream f(path);
    f << doc.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    if (!f) throw std::runtime_error("cannot write " + path);
  }

  const std::vector<Row>& rows() const { return rows_; }
  /// Forgets the steps after `step` (training goes back to a checkpoint).
  void truncate(int64_t step) {
    while (!rows_.empty() && rows_.back().s.step > step) rows_.pop_back();
  }
  static std::string human(double v) {
    return v >= 1e6 ? fmt("%.2fM", v / 1e6) : v >= 1e3 ? fmt("%.1fk", v / 1e3) : fmt("%.0f", v);
  }

 private:
  const Options& o_;
  bool tty_;
  double lastVal_ = NAN;
  std::vector<Row> rows_;
};

/// The PNG loss plot (training/app/loss_plot.h); returns a message for the user.
std::string plotPng(const std::vector<Row>& rows, const std::string& png, double baseline) {
  std::vector<int64_t> steps, valSteps;
  std::vector<double> loss, val;
  for (const Row& r : rows) {
    steps.push_back(r.s.step);
    loss.push_back(r.s.loss);
    if (std::isfinite(r.val)) {
      valSteps.push_back(r.s.step);
      val.push_back(r.val);
    }
  }
  std::string err;
  if (!bt::plot::writeLossPlot(png, steps, loss, valSteps, val, baseline, &err)) return "plot failed: " + err;
  return "plot written to " + png + " (training loss blue, validation orange, unigram baseline dashed)";
}

int run(const Options& o) {
  bt::LaunchInfo launch;
  std::unique_ptr<bt::ProcessGroup> world = bt::initWorldFromEnvironment(&launch);
  const bool tty = ::isatty(STDOUT_FILENO) == 1;

  // ---- data ----
  std::string dataPath = o.data, corpusNote;
  double floor = NAN;
  std::unique_ptr<bt::TextDataset> data;
  if (dataPath.empty()) dataPath = findUpwards("../shared/data/tinyshakespeare.txt");
  if (dataPath.empty()) dataPath = findUpwards("shared/data/tinyshakespeare.txt");
  if (!dataPath.empty()) {
    data = std::make_unique<bt::TextDataset>(bt::TextDataset::fromFile(dataPath));
    corpusNote = dataPath;
  } else {
    const bt::MarkovSource src = bt::MarkovSource::random(o.seed, 24, 2, 2.0);
    data = std::make_unique<bt::TextDataset>(bt::TextDataset::fromText(src.generate(o.seed, 400000)));
    floor = src.entropyRate();
    corpusNote = "generated order-2 Markov corpus (24 symbols, entropy rate " +
                 fmt("%.4f", floor) + " nats/char)";
  }
  const auto& train = data->tokens(bt::Split::kTrain);
  const double unigram = bt::unigramEntropy(train.data(), int64_t(train.size()), data->vocabSize());

  // ---- trainer ----
  bt::TrainerConfig c;
  c.model.width = o.width;
  c.model.layers = o.layers;
  c.model.heads = o.heads;
  c.model.context = o.context;
  // Padded to a multiple of 8 (and of tp): every TP size up to 8 trains the same model.
  c.model.vocab = bt::paddedVocab(bt::paddedVocab(data->vocabSize(), 8), o.tp);
  c.mesh = bt::MeshShape{o.dp, o.tp, o.pp};
  if (!bt::parseDpMode(o.dpMode, &c.dpMode))
    throw std::invalid_argument("--dp-mode: ddp, zero1, zero2, zero3 or fsdp, not '" + o.dpMode + "'");
  if (!bt::parseSchedule(o.schedule, &c.schedule))
    throw std::invalid_argument("--schedule: gpipe or 1f1b, not '" + o.schedule + "'");
  c.micros = o.micros;
  c.batch = o.batch;
  c.seed = o.seed;
  c.adamw.lr = o.lr;
  c.adamw.weightDecay = o.weightDecay;
  c.adamw.clipNorm = o.clip;
  c.evalBatches = int(o.evalBatches);
  c.reshardAfterForward = !o.noReshard;
  c.prefetch = !o.noPrefetch;
  if (o.bucketKib > 0) c.firstBucketElems = c.bucketCapElems = o.bucketKib * 1024 / 4;
  if (c.mesh.size() != world->size())
    throw std::invalid_argument("the layout " + c.mesh.describe() + " needs " +
                                std::to_string(c.mesh.size()) + " ranks; this job has " +
                                std::to_string(world->size()) + " (" + launch.launcher + ")");
  const int firstRank = world->rank();
  if (o.elastic) {
    bt::elasticCheck(c);
    if (o.checkpointDir.empty())
      throw std::invalid_argument("--elastic needs --checkpoint-dir (a directory every rank shares)");
  }
  const int64_t every = o.checkpointEvery > 0 ? o.checkpointEvery : (o.elastic ? 10 : 0);
  if (every > 0 && o.checkpointDir.empty())
    throw std::invalid_argument("--checkpoint-every needs --checkpoint-dir");
  auto trainer = std::make_unique<bt::Trainer<float>>(c, *world, *data);
  std::string loadDir = o.load;
  if (loadDir.empty() && !o.checkpointDir.empty()) bt::latestCheckpoint(o.checkpointDir, &loadDir);
  if (!loadDir.empty()) trainer->load(loadDir);

  // Every rank's model-state bytes (the report by kind, and the heap actually held), to
  // rank 0: with ZeRO they fall ~1/dp on each rank.
  const bt::StateBytes mine = trainer->stateBytes();
  const int64_t mineRow[5] = {mine.params, mine.grads, mine.optimizer, mine.buffers,
                              trainer->strategy().heldBytes()};
  std::vector<int64_t> rows(size_t(world->size()) * 5);
  world->allGather(mineRow, rows.data(), 5);

  if (world->rank() == 0) {
    std::printf("braid-train: %d rank%s via %s; %s\n", world->size(), world->size() > 1 ? "s" : "",
                launch.launcher.c_str(), c.describe().c_str());
    std::printf("data: %s; vocab %lld (model %lld), train %zu / val %zu tokens\n",
                corpusNote.c_str(), (long long)data->vocabSize(), (long long)c.model.vocab,
                train.size(), data->tokens(bt::Split::kValidation).size());
    std::printf("model: %lld parameters (%s); model state per rank in KiB:\n",
                (long long)trainer->modelParams(), bt::dpModeName(c.dpMode));
    std::printf("  rank    params     grads optimizer   buffers  heap held\n");
    for (int r = 0; r < world->size(); ++r) {
      const int64_t* x = rows.data() + size_t(r) * 5;
      std::printf("  %4d %9.1f %9.1f %9.1f %9.1f %10.1f\n", r, x[0] / 1024.0, x[1] / 1024.0,
                  x[2] / 1024.0, x[3] / 1024.0, x[4] / 1024.0);
    }
    std::printf("unigram baseline: %.4f nats%s\n", unigram,
                std::isfinite(floor) ? (", entropy-rate floor: " + fmt("%.4f", floor) + " nats").c_str() : "");
    if (trainer->stepsDone() > 0)
      std::printf("resumed from %s at step %lld\n", loadDir.c_str(), (long long)trainer->stepsDone());
    if (every > 0)
      std::printf("checkpoints: every %lld steps into %s/step-NNNNNNNN (%s)%s\n", (long long)every,
                  o.checkpointDir.c_str(), o.syncCheckpoint ? "synchronous" : "asynchronous",
                  o.elastic ? "; elastic: survives dead ranks" : "");
    std::fflush(stdout);
  }

  bt::AsyncCheckpointer ckpt(o.checkpointDir, world.get(), int(o.checkpointKeep), !o.syncCheckpoint);
  std::unique_ptr<bt::ElasticMembership> members;
  if (o.elastic) {
    bt::ElasticConfig ec;
    ec.dir = o.checkpointDir;
    ec.heartbeatMs = int(o.heartbeatMs);
    ec.deadAfterMs = int(o.deadMs);
    ec.agreeTimeoutMs = int(o.agreeMs);
    members = std::make_unique<bt::ElasticMembership>(ec, *world);
  }
  bt::ElasticRun<float> er{&world, &trainer, &c, data.get(), members.get(), &ckpt};
  std::vector<bt::ElasticEvent> events;

  Reporter rep(o, tty);
  double tokensTotal = 0, secondsTotal = 0, hiddenSum = 0, bubbleSum = 0;
  int measured = 0;
  double lastVal = NAN, copySeconds = 0;
  for (;;) {
    try {
      while (trainer->stepsDone() < o.steps) {
        if (firstRank == o.killRank && trainer->stepsDone() + 1 == o.killStep) {
          std::fprintf(stderr, "braid-train: rank %d: SIGKILL at step %lld, wall ms %.0f (--kill-rank)\n",
                       firstRank, (long long)o.killStep, bt::wallMs());
          std::fflush(stderr);
          ::raise(SIGKILL);
        }
        ckpt.poll();
        Row r;
        r.s = trainer->step();
        const bool evalNow = r.s.step == o.steps || (o.evalEvery > 0 && r.s.step % o.evalEvery == 0);
        if (evalNow) lastVal = r.val = trainer->evaluate();
        if (every > 0 && r.s.step % every == 0 && r.s.step < o.steps) {
          const double tc = bt::now();
          auto snap = std::make_shared<bt::CheckpointSnapshot<float>>(trainer->snapshot());
          copySeconds += bt::now() - tc;
          ckpt.save(r.s.step, [snap](const std::string& dir) {
            bt::writeCheckpointShard(dir, *snap);
            bt::writeCheckpointManifest(dir, *snap);
          });
        }
        if (r.s.step > 1 || o.steps == 1) {  // the first step warms up connections
          tokensTotal += double(c.batch * trainer->seqLen());
          secondsTotal += r.s.seconds;
          hiddenSum += r.s.commHidden;
          bubbleSum += r.s.bubble;
          ++measured;
        }
        rep.step(r, o.steps, c.mesh.dp > 1, world->rank() == 0);
      }
      if (!std::isfinite(lastVal)) lastVal = trainer->evaluate();
      ckpt.finish();
      if (!o.save.empty()) trainer->save(o.save);
      break;
    } catch (const bt::DistError& e) {
      if (!o.elastic) throw;
      // Another failure during the recovery (e.g. a second rank dies while the Trainer
      // is rebuilt) starts a new one; a few in a row mean something else is wrong.
      std::string error = e.what();
      for (int attempt = 1;; ++attempt) {
        try {
          events.push_back(bt::elasticRecover(error, bt::wallMs(), er, stdout));
          break;
        } catch (const bt::DistError& again) {
          if (attempt >= 4) throw;
          error = again.what();
        }
      }
      rep.truncate(trainer->stepsDone());
      lastVal = NAN;
    }
  }
  const bool root = world->rank() == 0;
  const std::string perRankCsv = o.logCsv.find("%r") != std::string::npos ? o.logCsv : "";
  if (!perRankCsv.empty()) {
    std::string path = perRankCsv;
    path.replace(path.find("%r"), 2, std::to_string(firstRank));
    rep.writeCsv(path);
  }

  if (root) {
    const double tps = secondsTotal > 0 ? tokensTotal / secondsTotal : 0;
    const double hidden = measured ? hiddenSum / measured : 0;
    const double bubble = measured ? bubbleSum / measured : 0;
    std::printf("unigram baseline: %.4f nats; final validation loss: %.4f nats (%s)\n", unigram,
                lastVal, lastVal < unigram ? "below the baseline" : "NOT below the baseline");
    std::printf("throughput: %s tokens/s", Reporter::human(tps).c_str());
    if (c.mesh.dp > 1) std::printf("; DP communication hidden behind backward: %.0f%%", 100 * hidden);
    if (o.pp > 1)
      std::printf("; pipeline bubble measured %.1f%% (theory %.1f%%)", 100 * bubble,
                  100 * bt::theoreticalBubble(o.pp, o.micros));
    std::printf("\n");
    const bt::StateBytes end = trainer->stateBytes();
    std::printf("rank 0 model state after training: %.1f KiB + peak transient buffers %.1f KiB "
                "(%s: buckets / gathered layers)\n",
                (end.params + end.grads + end.optimizer) / 1024.0, end.buffers / 1024.0,
                bt::dpModeName(c.dpMode));
    if (every > 0)
      std::printf("checkpoints: %d complete (newest: step %lld) in %s; %s writes took %.1f ms; the "
                  "training thread spent %.1f ms copying state at step boundaries, %.1f ms blocked "
                  "on checkpoint I/O and %.1f ms in completion all-reduces\n",
                  ckpt.committed(), (long long)ckpt.lastCommitted(), o.checkpointDir.c_str(),
                  o.syncCheckpoint ? "synchronous" : "background", 1000 * ckpt.writeSeconds(),
                  1000 * copySeconds, 1000 * ckpt.ioWaitSeconds(), 1000 * ckpt.agreeSeconds());
    for (const bt::ElasticEvent& ev : events)
      std::printf("elastic: shrank from %d to %d ranks at step %lld (failed: %s); resumed from step %lld; "
                  "detection %.0f ms after the last heartbeat, agreement %.0f ms, shrink %.0f ms, "
                  "rebuild + reload %.0f ms, recovery %.0f ms in all\n",
                  ev.fromSize, ev.toSize, (long long)ev.failedAtStep, ev.why.c_str(),
                  (long long)ev.resumedFrom, ev.detectMs, ev.agreeMs, ev.shrinkMs, ev.reloadMs,
                  ev.totalMs);
    if (o.elastic && events.empty()) std::printf("elastic: no rank failed\n");
    if (!o.save.empty()) std::printf("checkpoint saved to %s\n", o.save.c_str());
    if (!o.logCsv.empty() && perRankCsv.empty()) rep.writeCsv(o.logCsv);
    if (!o.logJson.empty()) {
      Json doc;
      doc["config"] = Json{{"model", c.model.describe()},
                           {"dp", c.mesh.dp},
                           {"tp", o.tp},
                           {"pp", o.pp},
                           {"dp_mode", bt::dpModeName(c.dpMode)},
                           {"schedule", bt::scheduleName(c.schedule)},
                           {"microbatches", o.micros},
                           {"batch", o.batch},
                           {"context", o.context},
                           {"lr", o.lr},
                           {"seed", o.seed},
                           {"ranks", world->size()},
                           {"launcher", launch.launcher}};
      doc["data"] = corpusNote;
      doc["parameters"] = trainer->modelParams();
      doc["unigram_baseline"] = unigram;
      doc["entropy_floor"] = floor;
      doc["final_val_loss"] = lastVal;
      doc["tokens_per_s"] = tps;
      doc["comm_hidden"] = c.mesh.dp > 1 ? hidden : NAN;
      doc["bubble"] = o.pp > 1 ? bubble : NAN;
      doc["bubble_theory"] = bt::theoreticalBubble(o.pp, o.micros);
      Json elastic = Json::array();
      for (const bt::ElasticEvent& ev : events)
        elastic.push_back(Json{{"at_step", ev.failedAtStep},
                               {"from", ev.fromSize},
                               {"to", ev.toSize},
                               {"resumed_from", ev.resumedFrom},
                               {"detect_ms", ev.detectMs},
                               {"recovery_ms", ev.totalMs}});
      doc["elastic"] = std::move(elastic);
      rep.writeJson(o.logJson, std::move(doc));
    }
    if (!o.plot.empty()) std::printf("%s\n", plotPng(rep.rows(), o.plot, unigram).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exitCode = 0;
  if (!parseArgs(argc, argv, &o, &exitCode)) return exitCode;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "braid-train: error: %s\n", e.what());
    return 1;
  }
}
