// tensorboard_test.cpp: io/tensorboard/: CRC-32C against published vectors, the TFRecord framing
// against the bytes TensorBoard's own Python RecordWriter writes, TensorBoard's default histogram
// buckets, and the event file (its name, its first record, flushing, a bad directory). Reading the
// files back with TensorBoard's reader is tests/app/tensorboard_app_test.cpp's job.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/tensorboard/crc32c.hpp"
#include "io/tensorboard/histogram.hpp"
#include "io/tensorboard/record_writer.hpp"
#include "io/tensorboard/summary_writer.hpp"

using namespace ampgrad;
using namespace ampgrad::tensorboard;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& tag) {
    fs::path dir = fs::temp_directory_path() / fmt::format("ampgrad_tb_{}_{}", tag, ::getpid());
    fs::remove_all(dir);
    return dir;
}

std::string read_bytes(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

uint64_t get_le(const std::string& bytes, size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    return v;
}

// Splits a TFRecord file into its payloads, checking both CRCs of every record.
std::vector<std::string> read_records(const std::string& bytes) {
    std::vector<std::string> payloads;
    size_t at = 0;
    while (at < bytes.size()) {
        REQUIRE(at + 12 <= bytes.size());
        const uint64_t length = get_le(bytes, at, 8);
        CHECK(get_le(bytes, at + 8, 4) == crc32c_masked(crc32c(bytes.substr(at, 8))));
        REQUIRE(at + 12 + length + 4 <= bytes.size());
        std::string payload = bytes.substr(at + 12, length);
        CHECK(get_le(bytes, at + 12 + length, 4) == crc32c_masked(crc32c(payload)));
        payloads.push_back(std::move(payload));
        at += 12 + length + 4;
    }
    return payloads;
}

fs::path only_file_in(const fs::path& dir) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
    REQUIRE(files.size() == 1);
    return files[0];
}

}  // namespace

TEST_CASE("tensorboard: CRC-32C matches the published vectors (RFC 3720 B.4) and TFRecord's mask") {
    CHECK(crc32c("") == 0u);
    CHECK(crc32c("123456789") == 0xE3069283u);   // the CRC catalogue's check value
    CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
    CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
    std::string ascending(32, 0), descending(32, 0);
    for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i), descending[i] = static_cast<char>(31 - i);
    CHECK(crc32c(ascending) == 0x46DD794Eu);
    CHECK(crc32c(descending) == 0x113FDB5Cu);
    // Extending in two pieces gives the CRC of the whole.
    CHECK(crc32c_extend(crc32c("1234"), "56789", 5) == 0xE3069283u);
    // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c(b"") and (b"123456789").
    CHECK(crc32c_masked(crc32c("")) == 0xA282EAD8u);
    CHECK(crc32c_masked(crc32c("123456789")) == 0xC78AB0E5u);
}

TEST_CASE("tensorboard: a record's bytes equal those of TensorBoard's RecordWriter") {
    // tensorboard.summary.writer.record_writer.RecordWriter(io.BytesIO()).write(b"hello"), as hex.
    const std::string expected = "0500000000000000eab2043e68656c6c6fbb1f1c19";
    const std::string record = encode_record("hello");
    std::string hex;
    for (unsigned char c : record) hex += fmt::format("{:02x}", c);
    CHECK(hex == expected);
    CHECK(read_records(record) == std::vector<std::string>{"hello"});
}

TEST_CASE("tensorboard: the default buckets are TensorFlow's: +-1e-12 * 1.1^k up to 1e20, then +-DBL_MAX, and 0") {
    const std::vector<double>& limits = default_bucket_limits();
    REQUIRE(limits.size() % 2 == 1);
    const size_t zero = limits.size() / 2;
    CHECK(limits[zero] == 0.0);
    CHECK(limits[zero + 1] == 1e-12);
    CHECK(limits[zero + 2] == doctest::Approx(1.1e-12));
    CHECK(limits.back() == DBL_MAX);
    CHECK(limits.front() == -DBL_MAX);
    CHECK(limits[limits.size() - 2] < 1e20);
    CHECK(limits[limits.size() - 2] * 1.1 >= 1e20);
    for (size_t i = 1; i < limits.size(); ++i) CHECK(limits[i - 1] < limits[i]);
    for (size_t i = 0; i < zero; ++i) CHECK(limits[i] == -limits[limits.size() - 1 - i]);
}

TEST_CASE("tensorboard: a histogram counts each finite value once, in the bucket below its limit") {
    const std::vector<float> values = {-1.5f, 0.0f, 0.25f, 3.0f, 1e-3f, 3.0f, NAN, INFINITY};
    const Histogram h = histogram_of(values);
    CHECK(h.num == 6.0);   // NaN and inf are left out
    CHECK(h.min == -1.5);
    CHECK(h.max == 3.0);
    CHECK(h.sum == doctest::Approx(-1.5 + 0.25 + 3.0 + 1e-3 + 3.0));
    CHECK(h.sum_squares == doctest::Approx(2.25 + 0.0625 + 9.0 + 1e-6 + 9.0));
    REQUIRE(h.bucket.size() == h.bucket_limit.size());
    double total = 0.0;
    for (size_t i = 0; i < h.bucket.size(); ++i) {
        total += h.bucket[i];
        if (i > 0) CHECK(h.bucket_limit[i - 1] < h.bucket_limit[i]);
        if (h.bucket[i] == 0.0 && i + 1 < h.bucket.size()) CHECK(h.bucket[i + 1] > 0.0);   // empty runs merged
    }
    CHECK(total == 6.0);
    // 0 falls in [0, 1e-12): the bucket whose limit is 1e-12 holds exactly it.
    const auto at_1e12 = std::find(h.bucket_limit.begin(), h.bucket_limit.end(), 1e-12);
    REQUIRE(at_1e12 != h.bucket_limit.end());
    CHECK(h.bucket[at_1e12 - h.bucket_limit.begin()] == 1.0);
    // Both 3.0s share one bucket, whose limit is the first above 3.
    const auto above_3 = std::upper_bound(h.bucket_limit.begin(), h.bucket_limit.end(), 3.0);
    CHECK(h.bucket[above_3 - h.bucket_limit.begin()] == 2.0);
}

TEST_CASE("tensorboard: the event file is named as TensorBoard's and starts with brain.Event:2") {
    const fs::path dir = fresh_dir("file") / "nested";
    {
        SummaryWriter w(dir.string(), /*flush_every=*/2);
        const std::string name = fs::path(w.path()).filename().string();
        CHECK(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.\d+)")));
        CHECK(name.find("." + std::to_string(::getpid()) + ".") != std::string::npos);
        CHECK(read_records(read_bytes(w.path())).size() == 1);   // the version record is on disk at once
        w.add_scalar("a", 1.0, 1);
        CHECK(read_records(read_bytes(w.path())).size() == 1);   // buffered
        w.add_scalar("a", 2.0, 2);
        CHECK(read_records(read_bytes(w.path())).size() == 3);   // the second record flushed both
        w.add_text("t", "text", 2);
        w.add_histogram("h", histogram_of(std::vector<float>{1.0f}), 2);
    }
    const std::vector<std::string> records = read_records(read_bytes(only_file_in(dir)));
    REQUIRE(records.size() == 5);   // the destructor flushed the rest
    CHECK(records[0].find("brain.Event:2") != std::string::npos);
    CHECK(records[3].find("text") != std::string::npos);
    fs::remove_all(dir.parent_path());
}

TEST_CASE("tensorboard: a directory that cannot be made is an IOError naming it") {
    const fs::path dir = fresh_dir("bad");
    fs::create_directories(dir);
    std::ofstream(dir / "a_file") << "x";
    const std::string bad = (dir / "a_file" / "tb").string();
    CHECK_THROWS_WITH_AS(SummaryWriter{bad}, doctest::Contains(bad.c_str()), IOError);
    CHECK_THROWS_AS(SummaryWriter{(dir / "a_file").string()}, IOError);   // exists, not a directory
    fs::remove_all(dir);
}
