// atomic_file_test.cpp: core/atomic_file.hpp writes a file whole, replaces it whole, and on a
// failure throws an IOError naming the path and leaves no temporary file behind.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

int entries_in(const fs::path& dir) {
    return static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("write_file_atomic: writes, replaces the old file whole, and leaves no temporary file") {
    const fs::path dir = testing::scratch_dir("atomic_file");
    const fs::path file = dir / "state.json";
    write_file_atomic(file.string(), "first, and longer\n");
    CHECK(read_text(file) == "first, and longer\n");
    write_file_atomic(file.string(), std::string("second\0bytes", 12));
    CHECK(read_text(file) == std::string("second\0bytes", 12));
    write_file_atomic(file.string(), "");
    CHECK(read_text(file).empty());
    CHECK(entries_in(dir) == 1);
    fsync_directory(dir.string());
    fs::remove_all(dir);
}

TEST_CASE("write_file_atomic: a failure is an IOError naming the path, and no temporary file stays") {
    const fs::path dir = testing::scratch_dir("atomic_file_fail");
    // The parent "folder" is a file (works as root too, unlike a read-only folder).
    write_file_atomic((dir / "plain").string(), "x");
    const fs::path under_file = dir / "plain" / "out.json";
    CHECK_THROWS_WITH_AS(write_file_atomic(under_file.string(), "y"), doctest::Contains(under_file.string().c_str()), IOError);
    const fs::path missing = dir / "no_such_folder" / "out.json";
    CHECK_THROWS_WITH_AS(write_file_atomic(missing.string(), "y"), doctest::Contains(missing.string().c_str()), IOError);
    CHECK_THROWS_WITH_AS(write_file_atomic((dir / "").string(), "y"), doctest::Contains("names a folder"), IOError);
    // A writer that fails partway: the exception passes through, the old file stays, the temporary goes.
    const fs::path file = dir / "model.bin";
    write_file_atomic(file.string(), "old");
    auto half_then_fail = [&](int fd) {
        write_all(fd, "ne", 2, file.string());
        throw std::runtime_error("disk gone");
    };
    CHECK_THROWS_WITH_AS(write_file_atomic(file.string(), half_then_fail), "disk gone", std::runtime_error);
    CHECK(read_text(file) == "old");
    CHECK(entries_in(dir) == 2);   // plain and model.bin
    CHECK_THROWS_WITH_AS(write_all(-1, "z", 1, file.string()), doctest::Contains(file.string().c_str()), IOError);
    CHECK_THROWS_WITH_AS(fsync_directory((dir / "no_such_folder").string()), doctest::Contains("no_such_folder"), IOError);
    fs::remove_all(dir);
}
