// token_shards_interop_test.cpp: shards written by Python the way llm.c's dev/data/data_common.py
// writes them (numpy; tests/data/llmc_write_datafile.py) load in ampgrad unchanged, and ampgrad's
// ShardWriter gives the same bytes for the same tokens. (The other direction, `ampgrad data
// prepare`'s shards against llm.c's loader checks, is in tests/app/data_prepare_test.cpp.) The
// interpreter is $AMPGRAD_PYTHON, else the venv scripts/setup.sh made in the build folder, else
// python3; without numpy there, this test fails.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "data/token_shards.hpp"
#include "tests/data/bpe_fixtures.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

std::string python() {
    if (const char* py = std::getenv("AMPGRAD_PYTHON"); py && *py) return py;
    if (const char* build = std::getenv("AMPGRAD_BUILD_ROOT")) {
        const fs::path venv = fs::path(build) / "python-venv" / "bin" / "python3";
        if (fs::exists(venv)) return venv.string();
    }
    return "python3";
}

// Runs the Python writer into `dir`; returns its exit status, its output in `log`.
int run_llmc_writer(const fs::path& dir, std::string& log) {
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    REQUIRE_MESSAGE(root, "AMPGRAD_SOURCE_ROOT is not set (run through meson test)");
    const fs::path out = dir / "python.log";
    const std::string cmd = fmt::format("'{}' '{}/tests/data/llmc_write_datafile.py' '{}' > '{}' 2>&1", python(), root,
                                        dir.string(), out.string());
    const int status = std::system(cmd.c_str());
    log = cmd + "\n" + testing::read_bytes(out.string());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void check_shard_from_python(const fs::path& path, const std::vector<int32_t>& expected, data::ShardDtype dtype,
                             int64_t vocab) {
    CAPTURE(path);
    const data::ShardCheck c = data::check_shard(path.string(), vocab);
    CHECK(c.header.dtype == dtype);
    REQUIRE(c.header.num_tokens == static_cast<int64_t>(expected.size()));
    data::MappedShard shard(path.string());
    std::vector<int64_t> got(expected.size());
    shard.read(0, shard.num_tokens(), got.data());
    CHECK(got == std::vector<int64_t>(expected.begin(), expected.end()));
    // ampgrad's writer, given the same tokens, writes the same bytes.
    fs::create_directories(path.parent_path() / "ampgrad");
    const fs::path again = path.parent_path() / "ampgrad" / path.filename();
    data::ShardWriter w(again.string(), dtype);
    w.append(expected);
    w.finish();
    CHECK(testing::read_bytes(again.string()) == testing::read_bytes(path.string()));
}

}  // namespace

TEST_CASE("shards written by llm.c's write_datafile (numpy) load unchanged, and ampgrad writes the same bytes") {
    const fs::path dir = testing::bpe_temp_dir("llmc_interop");
    std::string log;
    const int status = run_llmc_writer(dir, log);
    INFO(log);
    REQUIRE_MESSAGE(status != 3, "the Python side cannot import numpy: run scripts/setup.sh or set AMPGRAD_PYTHON");
    REQUIRE(status == 0);
    const nlohmann::json expected = nlohmann::json::parse(testing::read_bytes((dir / "expected.json").string()));
    check_shard_from_python(dir / "gpt2_val_000000.bin", expected.at("gpt2").get<std::vector<int32_t>>(),
                            data::ShardDtype::kUint16, 50257 + 65535);   // 65535 is in the list: any vocab above it
    check_shard_from_python(dir / "llama3_train_000001.bin", expected.at("llama3").get<std::vector<int32_t>>(),
                            data::ShardDtype::kUint32, 128256);
    CHECK(data::list_shards(dir.string(), "val") == std::vector<std::string>{(dir / "gpt2_val_000000.bin").string()});
    CHECK(data::list_shards(dir.string() + "/llama3_train_*.bin", "train") ==
          std::vector<std::string>{(dir / "llama3_train_000001.bin").string()});
}
