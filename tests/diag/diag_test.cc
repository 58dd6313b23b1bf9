// Unit tests of src/diag: fingerprints and their comparison messages, call tags (the
// free mismatch check's 16 bytes) and theirs, the flight recorder's states, JSON and
// per-user directory (read back by the doctor's parser), the JSON reader on good and bad
// text, and the doctor's diagnosis of made-up records.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "src/exec/op.h"
#include "src/exec/call_tag.h"
#include "src/diag/fingerprint.h"
#include "src/diag/flight_recorder.h"
#include "src/tools/doctor/doctor.h"

namespace braid {
namespace {

OpRecord coll(Coll c, size_t count, ncclDataType_t type = ncclFloat, ncclRedOp_t op = ncclSum,
              int root = 0) {
  OpRecord r;
  r.coll = c;
  r.count = count;
  r.type = type;
  r.op = op;
  r.root = root;
  r.collSeq = 7;
  return r;
}

std::vector<CollFingerprint> fingerprints(const std::vector<std::vector<OpRecord>>& perRank) {
  std::vector<CollFingerprint> out;
  for (const auto& ops : perRank) {
    std::vector<const OpRecord*> p;
    for (const OpRecord& o : ops) p.push_back(&o);
    out.push_back(makeFingerprint(p));
  }
  return out;
}

TEST(Fingerprint, EqualCallsAgreeAndUnusedFieldsDoNotMatter) {
  // All-gather has no root or op: ranks passing different garbage there still agree.
  auto a = coll(Coll::kAllGather, 10, ncclInt32, ncclMax, 3);
  auto b = coll(Coll::kAllGather, 10, ncclInt32, ncclSum, 0);
  EXPECT_EQ(compareFingerprints(fingerprints({{a}, {b}, {a}})), "");
}

TEST(Fingerprint, NamesTheOddRankAndBothCalls) {
  auto good = coll(Coll::kReduce, 64, ncclFloat, ncclSum, 2);
  auto badRoot = coll(Coll::kReduce, 64, ncclFloat, ncclSum, 1);
  const std::string m = compareFingerprints(fingerprints({{good}, {good}, {badRoot}, {good}}));
  EXPECT_EQ(m, "collective mismatch (BRAID_CHECK): at collective #7: ranks 0,1,3 called "
               "ncclReduce(count 64, float, sum, root 2) but rank 2 called "
               "ncclReduce(count 64, float, sum, root 1)");
  auto badType = coll(Coll::kAllReduce, 64, ncclHalf);
  auto ar = coll(Coll::kAllReduce, 64);
  EXPECT_NE(compareFingerprints(fingerprints({{ar}, {badType}})).find("half"), std::string::npos);
}

TEST(Fingerprint, GroupsOfDifferentLengthAndLateDifferences) {
  auto ar = coll(Coll::kAllReduce, 8);
  auto bc = coll(Coll::kBroadcast, 8);
  std::string m = compareFingerprints(fingerprints({{ar, bc}, {ar}, {ar, bc}}));
  EXPECT_NE(m.find("ranks 0,2 called 2 collective(s) in the group"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 1 called 1"), std::string::npos) << m;
  // A difference past the calls carried in full is still caught (by the hash).
  std::vector<OpRecord> longGroup(6, ar), other(6, ar);
  other[5] = coll(Coll::kAllReduce, 9);
  m = compareFingerprints(fingerprints({longGroup, other}));
  EXPECT_NE(m.find("differ in the group's collectives after the 4th"), std::string::npos) << m;
}

TEST(CallTag, EveryFieldCountsAndMessagesNameBothCalls) {
  const OpRecord base = coll(Coll::kAllReduce, 1024);
  const CallTag t = makeCallTag(base);
  EXPECT_TRUE(t.tagged());
  EXPECT_EQ(makeCallTag(base), t);
  EXPECT_NE(makeCallTag(coll(Coll::kAllReduce, 1000)), t);
  EXPECT_NE(makeCallTag(coll(Coll::kAllReduce, 1024, ncclInt32)), t);
  EXPECT_NE(makeCallTag(coll(Coll::kAllReduce, 1024, ncclFloat, ncclMax)), t);
  EXPECT_NE(makeCallTag(coll(Coll::kAllGather, 1024)), t);
  OpRecord later = base;
  later.collSeq = 8;
  EXPECT_NE(makeCallTag(later), t);
  // Root and op only where the collective has them; in-place and buffers never.
  EXPECT_EQ(makeCallTag(coll(Coll::kAllGather, 8, ncclFloat, ncclSum, 0)),
            makeCallTag(coll(Coll::kAllGather, 8, ncclFloat, ncclMax, 3)));
  EXPECT_NE(makeCallTag(coll(Coll::kBroadcast, 8, ncclFloat, ncclSum, 0)),
            makeCallTag(coll(Coll::kBroadcast, 8, ncclFloat, ncclSum, 1)));
  // Sends and receives: bytes only (floats sent may be received as bytes, as in NCCL).
  OpRecord send = coll(Coll::kSendRecv, 100), recv = coll(Coll::kSendRecv, 400, ncclUint8);
  send.isSend = true;
  recv.root = 3;
  EXPECT_EQ(makeCallTag(send), makeCallTag(recv));
  EXPECT_EQ(describeCallTag(makeCallTag(send)), "ncclSend/ncclRecv of 400 bytes");
  EXPECT_EQ(describeCallTag(t), "collective #7 ncclAllReduce(count 1024, float, sum)");
  EXPECT_EQ(tagMismatchMessage(t, 2, makeCallTag(coll(Coll::kBroadcast, 8, ncclFloat, ncclSum, 1))),
            "collective mismatch: rank 2 sent data of collective #7 ncclBroadcast(count 8, "
            "float, root 1) but this rank called collective #7 ncclAllReduce(count 1024, "
            "float, sum)");
  // The board's message, the same on every rank; nothing when all agree.
  std::vector<CallTag> all(4, t);
  EXPECT_EQ(compareCallTags(all.data(), 4), "");
  all[2] = makeCallTag(coll(Coll::kAllReduce, 1000));
  EXPECT_EQ(compareCallTags(all.data(), 4),
            "collective mismatch: at collective #7: ranks 0,1,3 called ncclAllReduce(count "
            "1024, float, sum) but rank 2 called ncclAllReduce(count 1000, float, sum)");
  EXPECT_FALSE(CallTag().tagged());
}

TEST(FlightRecorder, PerUserDirectory) {
  unsetenv("BRAID_FLIGHT_RECORDER_DIR");
  EXPECT_EQ(flightRecorderDir(), "/tmp/braid-flight-recorder-" + std::to_string(geteuid()));
  char tmpl[] = "/tmp/braid-frdir-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/records";
  std::string why;
  ASSERT_TRUE(prepareFlightRecorderDir(dir, true, &why)) << why;
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Opened to others: closed again. A link in its place, or another owner: refused.
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  ASSERT_TRUE(prepareFlightRecorderDir(dir, true, &why)) << why;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string link = std::string(tmpl) + "/link";
  ASSERT_EQ(symlink(dir.c_str(), link.c_str()), 0);
  EXPECT_FALSE(prepareFlightRecorderDir(link, true, &why));
  EXPECT_NE(why.find("not a directory"), std::string::npos) << why;
  EXPECT_TRUE(prepareFlightRecorderDir(link, false, &why)) << "a chosen directory is the user's";
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dir.c_str(), 12345, 12345), 0);
    EXPECT_FALSE(prepareFlightRecorderDir(dir, true, &why));
    EXPECT_NE(why.find("belongs to user 12345"), std::string::npos) << why;
  }
  unlink(link.c_str());
  rmdir(dir.c_str());
  rmdir(tmpl);
  setenv("BRAID_FLIGHT_RECORDER_DIR", "/somewhere/else", 1);
  EXPECT_EQ(flightRecorderDir(), "/somewhere/else");
  unsetenv("BRAID_FLIGHT_RECORDER_DIR");
}

TEST(FlightRecorder, StatesTimesAndJsonReadBack) {
  FlightRecorder fr(4);
  FrIdentity id;
  id.rank = 1;
  id.nranks = 2;
  id.commHash = 0xabcdef;
  fr.setIdentity(id);
  std::vector<OpRecord> ops;
  for (int i = 0; i < 6; ++i) {
    OpRecord op = coll(Coll::kAllReduce, size_t(100 + i));
    op.call = "ncclAllReduce";
    ops.push_back(op);
  }
  OpRecord send;
  send.coll = Coll::kSendRecv;
  send.isSend = true;
  send.root = 0;
  send.count = 5;
  send.call = "ncclSend";
  int64_t coll = 0;
  for (OpRecord& op : ops) {
    op.collSeq = coll++;  // as issueBatch numbers them
    fr.queued(&op);
  }
  send.collSeq = -1;
  fr.queued(&send);
  EXPECT_EQ(ops[5].frSeq, 5u);
  EXPECT_EQ(ops[5].collSeq, 5);
  EXPECT_EQ(send.collSeq, -1);  // not a collective
  for (int i = 0; i < 5; ++i) {
    fr.started(ops[size_t(i)].frSeq, "ring");
    fr.finished(ops[size_t(i)].frSeq, true);
  }
  fr.started(ops[5].frSeq, "tree");
  fr.waiting(ops[5].frSeq, 0, "waiting for data from rank 0");
  fr.finished(ops[0].frSeq, false, "overwritten: ignored");  // long gone from the ring
  EXPECT_TRUE(fr.outstanding());
  FrRecord r;
  std::string error;
  ASSERT_TRUE(parseFlightRecord(fr.toJson("test"), &r, &error)) << error;
  EXPECT_EQ(r.reason, "test");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.comm, "0000000000abcdef");
  EXPECT_EQ(r.collectivesIssued, 6);
  ASSERT_EQ(r.ops.size(), 4u);  // the ring keeps the last 4
  EXPECT_EQ(r.ops[0].seq, 3);
  EXPECT_EQ(r.ops[0].state, "done");
  EXPECT_EQ(r.ops[2].state, "started");
  EXPECT_EQ(r.ops[2].algorithm, "tree");
  EXPECT_TRUE(r.ops[2].waiting);
  EXPECT_EQ(r.ops[2].waitingOn, 0);
  EXPECT_EQ(r.ops[2].detail, "waiting for data from rank 0");
  EXPECT_EQ(r.ops[3].call, "ncclSend");
  EXPECT_EQ(r.ops[3].peer, 0);
  EXPECT_EQ(r.ops[3].state, "queued");
}

TEST(FlightRecordReader, RefusesWhatIsNotARecord) {
  FrRecord r;
  std::string e;
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "01x", "tru", "[1] 2",
                          "{\"a\":\"\\q\"}", "-", "1.", "1e"}) {
    e.clear();
    EXPECT_FALSE(parseFlightRecord(bad, &r, &e)) << "accepted: " << bad;
    EXPECT_NE(e.find("not valid JSON"), std::string::npos) << bad << ": " << e;
  }
  // Deep nesting is refused, not a stack overflow.
  EXPECT_FALSE(parseFlightRecord(std::string(100000, '['), &r, &e));
  EXPECT_FALSE(parseFlightRecord(std::string(100000, '[') + std::string(100000, ']'), &r, &e));
  EXPECT_NE(e.find("not a Braid flight record"), std::string::npos) << e;
  // Valid JSON of another shape, and members of the wrong type: refused or defaulted.
  EXPECT_FALSE(parseFlightRecord(R"({"format": 7})", &r, &e));
  EXPECT_NE(e.find("not a Braid flight record"), std::string::npos) << e;
  ASSERT_TRUE(parseFlightRecord(
      R"({"format":"braid-flight-record","rank":1,"nranks":2,"host":3,"entries":[5,{"seq":"x","call":"ncclSend","peer":0}]})",
      &r, &e)) << e;
  EXPECT_EQ(r.host, "");
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].seq, 0);
  EXPECT_EQ(r.ops[0].call, "ncclSend");
  EXPECT_EQ(r.ops[0].peer, 0);
  EXPECT_FALSE(parseFlightRecord(R"({"format":"braid-flight-record","rank":2,"nranks":2})", &r, &e));
  EXPECT_NE(e.find("is not valid"), std::string::npos) << e;
}

std::string record(int rank, const std::string& entries, int64_t colls) {
  return R"({"format":"braid-flight-record","version":1,"reason":"timeout","time_us":5000000,)"
         R"("rank":)" + std::to_string(rank) + R"(,"nranks":3,"comm":"c1","collectives_issued":)" +
         std::to_string(colls) + R"(,"entries":[)" + entries + "]}";
}

TEST(Doctor, MismatchWithoutTheCheckAndWhoIsBehind) {
  const std::string done0 = R"({"seq":0,"coll_seq":0,"call":"ncclAllReduce","count":4,"type":"float","op":"sum","state":"done","queued_us":1})";
  const std::string stuckA = R"({"seq":1,"coll_seq":1,"call":"ncclAllReduce","count":4,"type":"float","op":"sum","state":"started","queued_us":1,"started_us":1000000,"waiting_on":2})";
  const std::string stuckB = R"({"seq":1,"coll_seq":1,"call":"ncclAllReduce","count":8,"type":"float","op":"sum","state":"started","queued_us":1,"started_us":1000000,"waiting_on":0})";
  std::vector<FrRecord> recs(3);
  std::string e;
  ASSERT_TRUE(parseFlightRecord(record(0, done0 + "," + stuckA, 2), &recs[0], &e)) << e;
  ASSERT_TRUE(parseFlightRecord(record(1, done0 + "," + stuckB, 2), &recs[1], &e)) << e;
  ASSERT_TRUE(parseFlightRecord(record(2, done0, 1), &recs[2], &e)) << e;
  const std::string d = diagnose(recs);
  EXPECT_NE(d.find("MISMATCH at collective #1: rank 0 called #1 ncclAllReduce(count 4, float, "
                   "sum); rank 1 called #1 ncclAllReduce(count 8, float, sum)"),
            std::string::npos) << d;
  EXPECT_NE(d.find("rank 2 never called it"), std::string::npos) << d;
  EXPECT_NE(d.find("for up to 4.0 s"), std::string::npos) << d;
  EXPECT_NE(d.find("=> the ranks called different collectives at #1"), std::string::npos) << d;
  // Not a record: refused with a reason.
  FrRecord r;
  EXPECT_FALSE(parseFlightRecord("{\"format\":\"other\"}", &r, &e));
  EXPECT_FALSE(parseFlightRecord(record(5, "", 0), &r, &e));  // rank 5 of 3
}

}  // namespace
}  // namespace braid
