// token_shards_test.cpp: llm.c's token shard files (data/token_shards.hpp): the header bytes as
// llm.c's dev/data/data_common.py writes them (built here by hand: 256 little-endian int32, then
// the tokens), round trips in uint16 and uint32, every corruption a FormatError naming the file
// and the byte offset, a ShardWriter that is not finished leaves nothing, and shard listing.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/token_shards.hpp"
#include "tests/data/bpe_fixtures.hpp"
#include "tests/support/corrupt_inputs.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;
using ampgrad::testing::bpe_temp_dir;
using ampgrad::testing::read_bytes;
using ampgrad::testing::write_bytes;

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// The header as data_common.py's write_datafile lays it out, written out by hand: int32 [0] magic,
// [1] version, [2] token count, [3..255] zero, little-endian.
std::string llmc_header(int32_t magic, int32_t version, uint32_t count) {
    std::string out;
    put_le(out, static_cast<uint32_t>(magic), 4);
    put_le(out, static_cast<uint32_t>(version), 4);
    put_le(out, count, 4);
    out.append(253 * 4, '\0');
    return out;
}

// A whole shard: the header, then each token as a little-endian uint16 or uint32.
std::string llmc_shard_bytes(int32_t magic, int32_t version, const std::vector<uint32_t>& tokens, int token_bytes) {
    std::string out = llmc_header(magic, version, static_cast<uint32_t>(tokens.size()));
    for (uint32_t t : tokens) put_le(out, t, token_bytes);
    return out;
}

std::string write_shard(const fs::path& path, data::ShardDtype dtype, const std::vector<int32_t>& ids) {
    data::ShardWriter w(path.string(), dtype);
    w.append(ids);
    w.finish();
    return path.string();
}

std::vector<int64_t> read_all(const std::string& path) {
    data::MappedShard s(path);
    std::vector<int64_t> out(static_cast<size_t>(s.num_tokens()));
    s.read(0, s.num_tokens(), out.data());
    return out;
}

// The FormatError `fn` throws; its message must name the file and each of `facts`.
void check_format_error(const std::string& path, const std::vector<std::string>& facts, auto fn) {
    try {
        fn();
        FAIL("no FormatError for " << path);
    } catch (const FormatError& e) {
        const std::string msg = e.what();
        CAPTURE(msg);
        CHECK(msg.find(path) != std::string::npos);
        for (const std::string& f : facts) CHECK(msg.find(f) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("the shard header is llm.c's: 256 little-endian int32, magic, version, count") {
    CHECK(data::encode_shard_header(data::ShardDtype::kUint16, 5) == llmc_header(20240520, 1, 5));
    CHECK(data::encode_shard_header(data::ShardDtype::kUint32, 0) == llmc_header(20240801, 7, 0));
    const std::string h16 = data::encode_shard_header(data::ShardDtype::kUint16, 5);
    CHECK(h16.substr(0, 12) == std::string("\x88\xD8\x34\x01\x01\0\0\0\x05\0\0\0", 12));   // 20240520 = 0x0134D888
    const std::string h32 = data::encode_shard_header(data::ShardDtype::kUint32, 0x01020304);
    REQUIRE(h32.size() == 1024);
    CHECK(h32.substr(0, 12) == std::string("\xA1\xD9\x34\x01\x07\0\0\0\x04\x03\x02\x01", 12));   // 20240801 = 0x0134D9A1
    CHECK(h32.substr(12) == std::string(1012, '\0'));
    CHECK_THROWS_AS(data::encode_shard_header(data::ShardDtype::kUint16, int64_t{1} << 31), ValueError);
}

TEST_CASE("ShardWriter writes exactly llm.c's bytes, and they read back (uint16)") {
    const fs::path dir = bpe_temp_dir("shards");
    const std::vector<int32_t> ids = {50256, 0, 1, 255, 256, 65535, 15496, 995};
    const std::string path = write_shard(dir / "t_val_000000.bin", data::ShardDtype::kUint16, ids);
    CHECK(read_bytes(path) == llmc_shard_bytes(20240520, 1, {50256, 0, 1, 255, 256, 65535, 15496, 995}, 2));
    CHECK(read_all(path) == std::vector<int64_t>(ids.begin(), ids.end()));
    const data::ShardCheck c = data::check_shard(path, 65536);
    CHECK(c.header.dtype == data::ShardDtype::kUint16);
    CHECK(c.header.num_tokens == 8);
    CHECK(c.max_token == 65535);
    data::MappedShard s(path);
    std::vector<int64_t> middle(3);
    s.read(2, 3, middle.data());
    CHECK(middle == std::vector<int64_t>{1, 255, 256});
    CHECK_THROWS_AS(s.read(6, 3, middle.data()), IndexError);
    CHECK(fs::exists(write_shard(dir / "empty.bin", data::ShardDtype::kUint16, {})));
    CHECK(data::read_shard_header((dir / "empty.bin").string()).num_tokens == 0);
}

TEST_CASE("a vocabulary over 65,536 tokens is stored as uint32 with llm.c's Llama 3 header") {
    CHECK(data::shard_dtype_for_vocab(50257) == data::ShardDtype::kUint16);
    CHECK(data::shard_dtype_for_vocab(65536) == data::ShardDtype::kUint16);
    CHECK(data::shard_dtype_for_vocab(65537) == data::ShardDtype::kUint32);
    CHECK(data::shard_dtype_for_vocab(128256) == data::ShardDtype::kUint32);
    const fs::path dir = bpe_temp_dir("shards32");
    const std::vector<int32_t> ids = {128000, 0, 65536, 128255, 70000};
    const std::string path = write_shard(dir / "l_train_000001.bin", data::ShardDtype::kUint32, ids);
    CHECK(read_bytes(path) == llmc_shard_bytes(20240801, 7, {128000, 0, 65536, 128255, 70000}, 4));
    CHECK(read_all(path) == std::vector<int64_t>(ids.begin(), ids.end()));
    CHECK(data::check_shard(path, 128256).max_token == 128255);
    // uint16 cannot hold 65536: the writer refuses the call, naming the shard, and takes none of its ids.
    data::ShardWriter w((dir / "small.bin").string(), data::ShardDtype::kUint16);
    w.append({1, 2});
    CHECK_THROWS_WITH_AS(w.append({3, 65536}), doctest::Contains("small.bin"), ValueError);
    CHECK_THROWS_AS(w.append({-1}), ValueError);
    w.finish();
    CHECK(read_all((dir / "small.bin").string()) == std::vector<int64_t>{1, 2});
}

TEST_CASE("every corrupt shard is a FormatError naming the file and the offset") {
    const fs::path dir = bpe_temp_dir("corrupt");
    const std::string good = llmc_shard_bytes(20240520, 1, {1, 2, 3, 4}, 2);
    auto variant = [&](const std::string& name, std::string bytes) {
        const std::string path = (dir / name).string();
        write_bytes(path, bytes);
        return path;
    };
    std::string bad_magic = good;
    bad_magic[0] = 0x11;
    const std::string p1 = variant("magic.bin", bad_magic);
    check_format_error(p1, {"bad magic", "offset 0"}, [&] { data::read_shard_header(p1); });
    std::string bad_version = good;
    bad_version[4] = 2;
    const std::string p2 = variant("version.bin", bad_version);
    check_format_error(p2, {"version 2", "offset 4"}, [&] { data::read_shard_header(p2); });
    const std::string p3 = variant("short.bin", good.substr(0, 100));
    check_format_error(p3, {"100 bytes", "offset 100"}, [&] { data::read_shard_header(p3); });
    const std::string p4 = variant("truncated.bin", good.substr(0, good.size() - 1));
    check_format_error(p4, {"offset 8", "counts 4", "1031 bytes", "truncated"}, [&] { data::read_shard_header(p4); });
    const std::string p5 = variant("long.bin", good + "xy");
    check_format_error(p5, {"offset 8", "1034 bytes"}, [&] { data::MappedShard s(p5); });
    std::string negative = good;
    negative[11] = static_cast<char>(0x80);
    const std::string p6 = variant("negative.bin", negative);
    check_format_error(p6, {"negative", "offset 8"}, [&] { data::read_shard_header(p6); });
    // A token id outside the model's vocabulary: the third token (byte offset 1024 + 2*2).
    const std::string p7 = variant("id.bin", llmc_shard_bytes(20240520, 1, {1, 2, 300, 4}, 2));
    check_format_error(p7, {"token 2", "id 300", "byte offset 1028", "vocabulary of 256"}, [&] { data::check_shard(p7, 256); });
    CHECK(data::check_shard(p7, 301).max_token == 300);
    CHECK_THROWS_AS(data::read_shard_header((dir / "missing.bin").string()), IOError);
}

TEST_CASE("every corruption of a shard is refused with an ampgrad::Error naming it, or reads within the vocabulary") {
    // Truncated, overwritten (the header's words included) and padded: opening and scanning the
    // shard either fails naming the file or yields tokens inside the vocabulary check's answer.
    const fs::path dir = bpe_temp_dir("corrupt_any");
    const std::string path = (dir / "s_train_000001.bin").string();
    write_bytes(path, llmc_shard_bytes(20240520, 1, {1, 2, 3, 4, 5, 6, 7, 8}, 2));
    const size_t refused = testing::check_file_corruptions(path, testing::byte_corruptions(testing::read_whole_file(path)), [&] {
        data::MappedShard shard(path);
        data::check_shard(path, 256);
    }, "s_train_000001.bin");
    CHECK(refused > 10);   // most single bytes land in the header's 253 unused words, which llm.c ignores too
    fs::remove_all(dir);
}

TEST_CASE("a ShardWriter destroyed before finish() leaves no file, not even its temporary one") {
    const fs::path dir = bpe_temp_dir("unfinished");
    {
        data::ShardWriter w((dir / "x_train_000001.bin").string(), data::ShardDtype::kUint16);
        w.append(std::vector<int32_t>(5'000'000, 7));   // past the writer's 8 MiB buffer: bytes on disk
        CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
    }
    CHECK(fs::is_empty(dir));
    data::ShardWriter w((dir / "y.bin").string(), data::ShardDtype::kUint16);
    w.finish();
    CHECK_THROWS_AS(w.finish(), ValueError);
    CHECK_THROWS_AS(w.append({1}), ValueError);
}

TEST_CASE("list_shards: a folder, a glob or one file, and the val / train split") {
    const fs::path dir = bpe_temp_dir("list");
    for (const char* name : {"c_val_000000.bin", "c_train_000002.bin", "c_train_000001.bin"})
        write_shard(dir / name, data::ShardDtype::kUint16, {1, 2});
    write_bytes(dir / "meta.json", "{}");
    const std::string d = dir.string();
    CHECK(data::list_shards(d, "") ==
          std::vector<std::string>{d + "/c_train_000001.bin", d + "/c_train_000002.bin", d + "/c_val_000000.bin"});
    CHECK(data::list_shards(d, "train") == std::vector<std::string>{d + "/c_train_000001.bin", d + "/c_train_000002.bin"});
    CHECK(data::list_shards(d, "val") == std::vector<std::string>{d + "/c_val_000000.bin"});
    CHECK(data::list_shards(d + "/c_train_*.bin", "") == std::vector<std::string>{d + "/c_train_000001.bin", d + "/c_train_000002.bin"});
    CHECK(data::list_shards(d + "/c_val_000000.bin", "val") == std::vector<std::string>{d + "/c_val_000000.bin"});
    CHECK_THROWS_WITH_AS(data::list_shards(d + "/nothing_*.bin", "train"), doctest::Contains("nothing_*.bin"), IOError);
    CHECK(data::names_token_shards(d));
    CHECK(data::names_token_shards("x/*.bin"));
    CHECK(data::names_token_shards(d + "/c_val_000000.bin"));   // a .bin file that starts with llm.c's magic
    CHECK_FALSE(data::names_token_shards("no/such/a.bin"));      // else it is read as text (and named as such)
    write_bytes(dir / "elf.bin", std::string("\x7f" "ELF\0\0\x01", 7));
    CHECK_FALSE(data::names_token_shards((dir / "elf.bin").string()));
    CHECK_FALSE(data::names_token_shards("notes.txt"));
    // Without any *_train_* name, "train" keeps everything that is not *_val_*.
    const fs::path plain = bpe_temp_dir("list_plain");
    write_shard(plain / "a.bin", data::ShardDtype::kUint16, {1});
    write_shard(plain / "b_val_000000.bin", data::ShardDtype::kUint16, {1});
    CHECK(data::list_shards(plain.string(), "train") == std::vector<std::string>{(plain / "a.bin").string()});
}
