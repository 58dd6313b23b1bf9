// Output of the perf programs: the nccl-tests table on stdout and the optional JSON file.
#ifndef BRAID_PERF_REPORT_H_
#define BRAID_PERF_REPORT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "perf/datatypes.h"
#include "perf/options.h"

namespace braid_perf {

/// One rank's identity, exchanged with ncclAllGather for the "Using devices" lines.
struct RankRecord {
  int rank;
  int pid;
  int device;
  int group;
  char host[48];
};
static_assert(sizeof(RankRecord) == 64, "RankRecord travels as 64 bytes");

/// Results of one size in one placement (out-of-place or in-place), over all ranks.
struct PlaceResult {
  bool valid = false;    ///< false: this placement does not exist for the collective (N/A)
  double timeUs = 0;     ///< per operation, by the -a mode
  double algBw = 0;      ///< GB/s
  double busBw = 0;      ///< GB/s
  double wrong = 0;      ///< wrong elements summed over every rank
  bool checked = false;  ///< false when -c 0
};

/// One line of the table.
struct Row {
  size_t bytes = 0;
  size_t count = 0;
  ncclDataType_t type = ncclFloat;
  PerfOp op = PerfOp::kNone;
  int root = -1;
  PlaceResult outOfPlace, inPlace;
};

/// Collects the rows and prints them as they come (only on the printing rank).
class Report {
 public:
  /// `program` is e.g. "all_reduce_perf"; `collective` is e.g. "all_reduce".
  Report(std::string program, std::string collective, const Options& opt, int nranks, int nprocs);
  /// The "# nccl-tests-compatible ..." preamble, the devices and the column headers.
  void printHeader(const std::vector<RankRecord>& ranks, int version) const;
  /// Print one row and keep it for the summary and the JSON file.
  void addRow(const Row& row);
  /// "# Out of bounds values" and "# Avg bus bandwidth" lines.
  void printFooter() const;
  /// Write every row as JSON; false with a message on stderr on failure.
  bool writeJson(const std::string& path) const;
  /// Wrong elements over all rows.
  double totalWrong() const;
  /// Average busbw over every reported placement (0 when none).
  double avgBusBw() const;

 private:
  std::string program_, collective_;
  Options opt_;
  int nranks_, nprocs_;
  std::vector<Row> rows_;
};

}  // namespace braid_perf

#endif  // BRAID_PERF_REPORT_H_
