// braid-doctor: reads the flight records of every rank (the JSON files communicators
// write on a timeout, a dead peer, an abort, SIGUSR1 or braidCommDumpFlightRecord) and
// prints the diagnosis: ranks behind, the collective and call they are on, who waits on
// whom, mismatched calls, failures, ranks with no record.
//
//   braid-doctor [DIR | FILE]...   (default: $BRAID_FLIGHT_RECORDER_DIR, else
//                                   /tmp/braid-flight-recorder-<uid>)
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/diag/flight_recorder.h"
#include "src/tools/cli.h"
#include "src/tools/doctor/doctor.h"

namespace {

bool isDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// The flight-record files in `dir` (braid-fr-*.json), sorted.
std::vector<std::string> listRecords(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("braid-fr-", 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".json") == 0)
      out.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  braid::cli::App app("Diagnoses a hang or failure from the flight records of all ranks.",
                      "braid-doctor");
  app.add_option("paths", paths,
                 "flight-record files (braid-fr-*.json) or directories of them (default: "
                 "$BRAID_FLIGHT_RECORDER_DIR, else /tmp/braid-flight-recorder-<uid>: here " +
                     braid::flightRecorderDir() + ")")
      ->type_name("DIR|FILE")
      ->multi_option_policy(braid::cli::MultiOptionPolicy::TakeAll);
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  if (paths.empty()) paths.push_back(braid::flightRecorderDir());
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    if (isDir(p)) {
      std::vector<std::string> found = listRecords(p);
      if (found.empty()) fprintf(stderr, "braid-doctor: no braid-fr-*.json in %s\n", p.c_str());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(p);
    }
  }
  std::vector<braid::FrRecord> records;
  int bad = 0;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) {
      fprintf(stderr, "braid-doctor: cannot read %s\n", f.c_str());
      ++bad;
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    braid::FrRecord r;
    std::string error;
    if (!braid::parseFlightRecord(ss.str(), &r, &error)) {
      fprintf(stderr, "braid-doctor: %s: %s\n", f.c_str(), error.c_str());
      ++bad;
      continue;
    }
    r.file = f;
    records.push_back(std::move(r));
  }
  if (records.empty()) {
    fprintf(stderr, "braid-doctor: no flight records to read\n");
    return 1;
  }
  fputs(braid::diagnose(records).c_str(), stdout);
  return bad ? 1 : 0;
}
