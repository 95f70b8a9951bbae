// safetensors_test.cpp: round trips of every dtype and layout, tied weights (a Module with a
// tied head), the atomic writer, and the reader's validation: each malformed file gives a
// FormatError naming the file and the fact.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "ampgrad/ampgrad.h"
#include "io/safetensors.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

fs::path scratch_dir() {
    static int n = 0;
    fs::path dir = fs::temp_directory_path() / fmt::format("ampgrad_st_{}_{}", ::getpid(), n++);
    fs::create_directories(dir);
    return dir;
}

// A file made of the given header text and data bytes, with a correct length prefix.
std::string file_bytes(const std::string& header, const std::string& data, std::optional<uint64_t> length = {}) {
    uint64_t n = length.value_or(header.size());
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
    return out + header + data;
}

void write_file(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
}

// Loads `bytes` from a file and expects a FormatError whose message has the file name and `fact`.
void expect_format_error(const std::string& bytes, const std::string& fact) {
    CAPTURE(fact);
    fs::path dir = scratch_dir();
    fs::path p = dir / "bad.safetensors";
    write_file(p, bytes);
    CHECK_THROWS_WITH_AS(io::load_safetensors(p.string()), doctest::Contains(p.string().c_str()), FormatError);
    CHECK_THROWS_WITH_AS(io::load_safetensors(p.string()), doctest::Contains(fact.c_str()), FormatError);
    fs::remove_all(dir);
}

// GPT-2's tie: the head's weight is the embedding table itself.
struct TiedLM : nn::Module {
    Tensor wte;
    std::shared_ptr<nn::Module> head = std::make_shared<nn::Module>("Head");
    TiedLM() : Module("TiedLM") {
        wte = register_parameter("wte", randn({11, 4}));
        head->register_parameter("weight", wte);
        register_module("lm_head", head);
        register_parameter("ln", ones({4}));
    }
};

}  // namespace

TEST_CASE("round trip: every dtype, 0-d, empty and non-contiguous tensors, metadata") {
    fs::path dir = scratch_dir();
    manual_seed(3);
    nn::NamedTensors t;
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16})
        t.insert(std::string(dtype_name(dt)), randn({3, 5}).to(dt));
    t.insert("i64", randint(-1000000, 1000000, {7}));
    t.insert("i32", randint(-5, 5, {2, 2}).to(kInt32));
    t.insert("bool", randn({4}) > 0.0);
    t.insert("scalar", scalar_tensor(-1.5));
    t.insert("empty", zeros({2, 0, 3}, TensorOptions(kInt64)));
    Tensor base = randn({4, 6});
    t.insert("transposed", base.t());                             // (6,4), strided
    t.insert("narrowed", base.narrow(1, 2, 3));                   // (4,3), offset + strided
    fs::path p = dir / "all.safetensors";
    io::save_safetensors(p.string(), t, {{"step", "12"}, {"empty", ""}});

    io::SafetensorsFile f = io::load_safetensors(p.string());
    CHECK(f.tensors.keys() == t.keys());                          // file order is insertion order
    for (const auto& [name, want] : t) {
        CAPTURE(name);
        const Tensor& got = f.tensors.at(name);
        CHECK(got.dtype() == want.dtype());
        CHECK(got.sizes() == want.sizes());
        CHECK(got.is_contiguous());
        CHECK(equal(got, want.contiguous()));
    }
    CHECK(f.metadata == io::Metadata{{"step", "12"}, {"empty", ""}});
    CHECK(f.tied.empty());
    io::Header h = io::read_safetensors_header(p.string());
    CHECK(h.data_start() % 8 == 0);
    CHECK(h.tensors.size() == t.size());
    fs::remove_all(dir);
}

TEST_CASE("tied weights are written once and come back as one tensor") {
    fs::path dir = scratch_dir();
    Tensor w = randn({5, 3});
    nn::NamedTensors t;
    t.insert("wte.weight", w.detach());
    t.insert("bias", zeros({3}));
    t.insert("lm_head.weight", w.detach());                       // same storage, offset and strides
    t.insert("copy", w.clone());                                  // equal values, own memory: not a tie
    t.insert("view", w.narrow(0, 1, 2));                          // overlapping but different: stored
    fs::path p = dir / "tied.safetensors";
    io::save_safetensors(p.string(), t);

    io::Header h = io::read_safetensors_header(p.string());
    CHECK(h.tensors.size() == 4);                                 // lm_head.weight is not stored
    CHECK(h.data_bytes == (15 + 3 + 15 + 6) * 4);
    CHECK(h.metadata.at("ampgrad.tied") == R"({"lm_head.weight":"wte.weight"})");

    io::SafetensorsFile f = io::load_safetensors(p.string());
    CHECK(f.tied == std::map<std::string, std::string>{{"lm_head.weight", "wte.weight"}});
    CHECK(f.metadata.empty());
    CHECK(f.tensors.at("lm_head.weight").is_same(f.tensors.at("wte.weight")));
    CHECK_FALSE(f.tensors.at("copy").is_same(f.tensors.at("wte.weight")));
    CHECK(equal(f.tensors.at("lm_head.weight"), w));
    CHECK(equal(f.tensors.at("view"), w.narrow(0, 1, 2).contiguous()));
    fs::remove_all(dir);
}

TEST_CASE("Module helpers: a model with a tied head saves the table once and loads back, tie intact") {
    fs::path dir = scratch_dir();
    manual_seed(1);
    auto a = std::make_shared<TiedLM>();
    auto b = std::make_shared<TiedLM>();
    CHECK_FALSE(equal(a->wte, b->wte));
    fs::path p = dir / "model.safetensors";
    io::save_state_dict(*a, p.string(), {{"model", "tied"}});
    io::Header h = io::read_safetensors_header(p.string());
    CHECK(h.tensors.size() == 2);                                 // wte and ln; lm_head.weight is a record
    CHECK(h.data_bytes == (44 + 4) * 4);

    io::load_state_dict(*b, p.string());
    CHECK(equal(b->wte, a->wte));
    CHECK(b->head->named_parameters().at("weight").is_same(b->wte));
    io::SafetensorsFile f = io::load_safetensors(p.string());
    CHECK(f.tensors.at("lm_head.weight").is_same(f.tensors.at("wte")));
    CHECK(f.metadata.at("model") == "tied");
    auto c = std::make_shared<TiedLM>();
    c->load_state_dict(io::load_safetensors(p.string()));          // the file reads as its dict
    CHECK(equal(c->wte, a->wte));

    auto other = std::make_shared<nn::Sequential>(std::make_shared<nn::Embedding>(11, 5));
    CHECK_THROWS_AS(io::load_state_dict(*other, p.string()), ValueError);      // strict: other keys
    fs::remove_all(dir);
}

TEST_CASE("the writer is atomic: it replaces the file whole and leaves no temporary file") {
    fs::path dir = scratch_dir();
    fs::path p = dir / "ckpt.safetensors";
    nn::NamedTensors first, second;
    first.insert("x", ones({100}));
    second.insert("y", zeros({3}));
    io::save_safetensors(p.string(), first);
    io::save_safetensors(p.string(), second);
    CHECK(io::load_safetensors(p.string()).tensors.keys() == std::vector<std::string>{"y"});
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir)) { (void)e; ++entries; }
    CHECK(entries == 1);

    // A failure (unknown directory) is an IOError naming the path; nothing is left behind.
    fs::path missing = dir / "no_such_dir" / "x.safetensors";
    CHECK_THROWS_WITH_AS(io::save_safetensors(missing.string(), first), doctest::Contains(missing.string().c_str()), IOError);
    CHECK_THROWS_WITH_AS(io::load_safetensors(missing.string()), doctest::Contains("cannot open"), IOError);
    fs::remove_all(dir);
}

TEST_CASE("the writer rejects reserved names and undefined tensors") {
    fs::path dir = scratch_dir();
    fs::path p = dir / "x.safetensors";
    nn::NamedTensors ok;
    ok.insert("a", ones({1}));
    CHECK_THROWS_AS(io::save_safetensors(p.string(), ok, {{"ampgrad.tied", "{}"}}), ValueError);
    nn::NamedTensors meta_name;
    meta_name.insert("__metadata__", ones({1}));
    CHECK_THROWS_AS(io::save_safetensors(p.string(), meta_name), ValueError);
    nn::NamedTensors undefined;
    undefined.insert("u", Tensor());
    CHECK_THROWS_AS(io::save_safetensors(p.string(), undefined), ValueError);
    CHECK_FALSE(fs::exists(p));
    fs::remove_all(dir);
}

TEST_CASE("the reader rejects each kind of malformed file with the fact") {
    const std::string f4(4, '\0');
    auto entry = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
        return fmt::format(R"({{"dtype":"{}","shape":{},"data_offsets":{}}})", dtype, shape, offsets);
    };
    expect_format_error("abc", "too short for the 8-byte header length");
    expect_format_error(file_bytes("{}", "", 1000), "does not fit the file");
    expect_format_error(file_bytes("{}", "", uint64_t{1} << 62), "over the limit");
    expect_format_error(file_bytes("[1]", ""), "starting with '{'");
    expect_format_error(file_bytes("{\"a\":", ""), "not valid JSON");
    expect_format_error(file_bytes("{}  x", ""), "not valid JSON");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[1]", "[0,4]") + R"(,"a":)" + entry("F32", "[1]", "[4,8]") + "}",
                                   f4 + f4), "\"a\" appears twice");
    expect_format_error(file_bytes(R"({"a":)" + entry("I8", "[4]", "[0,4]") + "}", f4), "dtype \"I8\"");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[2]", "[0,4]") + "}", f4), "needs 8 bytes");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[1]", "[0,8]") + "}", f4), "outside the 4-byte data");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[1]", "[4,0]") + "}", f4 + f4), "outside");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[-1]", "[0,4]") + "}", f4), "non-negative integer");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[1.5]", "[0,4]") + "}", f4), "non-negative integer");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[4294967296,4294967296]", "[0,4]") + "}", f4),
                        "more than 2^63");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[2]", "[0,8]") + R"(,"b":)" + entry("F32", "[1]", "[4,8]") + "}",
                                   f4 + f4), "overlap");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[1]", "[4,8]") + "}", f4 + f4), "belong to no tensor");
    expect_format_error(file_bytes(R"({"a":)" + entry("F32", "[1]", "[0,4]") + "}", f4 + f4), "cover 4");
    expect_format_error(file_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", f4), "no \"data_offsets\"");
    expect_format_error(file_bytes(R"({"__metadata__":{"k":1}})", ""), "is not a string");
    expect_format_error(file_bytes(R"({"a":{"dtype":"F32","shape":[[[1]]],"data_offsets":[0,4]}})", f4), "nests deeper");
    expect_format_error(file_bytes(R"({"__metadata__":{"ampgrad.tied":"{\"b\":\"zz\"}"}})", ""), "not a tensor in the file");
    expect_format_error(file_bytes(R"({"a":)" + entry("BOOL", "[2]", "[0,2]") + "}", std::string("\x01\x07", 2)),
                        "holds byte 7");
}

TEST_CASE("the in-memory parser accepts what the writer writes and keeps shapes exact") {
    std::vector<io::TensorEntry> entries = {{"w", "BF16", {2, 3}, 0, 12}, {"s", "I64", {}, 12, 20}};
    std::string header = io::serialize_header(entries, {{"k", "v"}});
    CHECK((8 + header.size()) % 8 == 0);
    std::string bytes = file_bytes(header, std::string(20, '\0'));
    io::Header h = io::parse_safetensors(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), "mem");
    REQUIRE(h.tensors.size() == 2);
    CHECK(h.tensors[0].name == "w");
    CHECK(h.tensors[0].shape == std::vector<int64_t>{2, 3});
    CHECK(h.tensors[1].shape.empty());
    CHECK(h.metadata.at("k") == "v");
}

TEST_CASE("SafetensorsReader: one tensor at a time, by name; a missing name names the file") {
    fs::path dir = scratch_dir();
    const std::string path = (dir / "two.safetensors").string();
    Tensor a = randn({3, 4}), b = arange(5, TensorOptions(kInt64));
    nn::NamedTensors tensors;
    tensors.insert("a", a);
    tensors.insert("b", b);
    io::save_safetensors(path, tensors);
    io::SafetensorsReader f(path);
    CHECK(f.path() == path);
    REQUIRE(f.header().tensors.size() == 2);
    REQUIRE(f.find("b") != nullptr);
    CHECK(f.find("b")->dtype == "I64");
    CHECK(f.find("c") == nullptr);
    CHECK(equal(f.read("b"), b));
    CHECK(equal(f.read("a"), a));
    CHECK_THROWS_WITH_AS(f.read("c"), doctest::Contains(path.c_str()), ValueError);
    // A truncated file fails when it opens, before any tensor is read.
    fs::resize_file(path, fs::file_size(path) - 4);
    CHECK_THROWS_AS(io::SafetensorsReader{path}, FormatError);
    // write_file_atomic: the text, and no temporary file left beside it.
    io::write_file_atomic((dir / "config.json").string(), "{\"a\": 1}\n");
    std::ifstream in(dir / "config.json");
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "{\"a\": 1}\n");
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);
    fs::remove_all(dir);
}

TEST_CASE("the obvious spellings: save from a braced list or a map, read the file as a dict") {
    fs::path dir = scratch_dir();
    Tensor w = tensor<float>({1, 2, 3, 4}, {2, 2}), b = tensor<int64_t>({7});
    io::save_safetensors((dir / "a.safetensors").string(), {{"w", w}, {"b", b}});
    io::SafetensorsFile file = io::load_safetensors((dir / "a.safetensors").string());
    CHECK(file.size() == 2);
    CHECK(equal(file.at("w"), w));
    CHECK(equal(file["b"], b));
    CHECK(file.contains("w"));
    CHECK_THROWS_AS(file.at("missing"), ValueError);
    std::vector<std::string> names;
    for (const auto& [name, t] : file) names.push_back(name);
    CHECK(names == std::vector<std::string>{"w", "b"});                 // the list's order
    std::map<std::string, Tensor> dict{{"x", w}};
    io::save_safetensors((dir / "m.safetensors").string(), dict);
    CHECK(equal(io::load_safetensors((dir / "m.safetensors").string()).at("x"), w));
    CHECK_THROWS_AS((nn::NamedTensors{{"w", w}, {"w", b}}), ValueError);  // duplicate name
    fs::remove_all(dir);
}
