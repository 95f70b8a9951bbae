// documents.cpp: listing a corpus's files and streaming its documents in pieces (data/documents.hpp).
#include "data/documents.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/unicode_classes.hpp"

namespace ampgrad::data {

namespace fs = std::filesystem;

namespace {

InputFile describe_file(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw IOError(fmt::format("data prepare: cannot stat the input \"{}\"", path.string()));
    InputFile f;
    f.path = fs::absolute(path).lexically_normal().string();
    f.bytes = static_cast<int64_t>(st.st_size);
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    f.jsonl = path.extension() == ".jsonl";
    return f;
}

bool hidden(const fs::path& path) { return path.filename().string().starts_with("."); }

// A folder's regular files, recursively, sorted by path, hidden files and folders left out (links to
// folders are not followed: no cycle).
std::vector<fs::path> files_under(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (hidden(it->path())) {
            if (it->is_directory()) it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file()) out.push_back(it->path());
    }
    if (ec) throw IOError(fmt::format("data prepare: cannot list the folder \"{}\": {}", dir.string(), ec.message()));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs) {
    std::vector<InputFile> files;
    for (const std::string& input : inputs) {
        std::error_code ec;
        const fs::file_status st = fs::status(input, ec);
        if (fs::is_directory(st)) {
            for (const fs::path& p : files_under(input)) files.push_back(describe_file(p));
        } else if (fs::is_regular_file(st)) {
            files.push_back(describe_file(input));
        } else {
            throw IOError(fmt::format("data prepare: the input \"{}\" is {}", input,
                                      fs::exists(st) ? "neither a file nor a folder" : "not there (no such file or folder)"));
        }
    }
    if (files.empty())
        throw IOError(fmt::format("data prepare: the inputs ({}) hold no file", fmt::join(inputs, ", ")));
    return files;
}

namespace {

// Whether text[..end) ends with a character that is not whitespace: a printable ASCII one, or a
// valid multi-byte UTF-8 one of another class than \s (U+00A0 and U+3000 are whitespace).
bool ends_with_non_space(std::string_view text, size_t end) {
    const auto last = static_cast<unsigned char>(text[end - 1]);
    if (last < 0x80) return last >= '!' && last <= '~';
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const Utf8Char ch = read_utf8_char(text, start);
    return ch.code_point != Utf8Char::kInvalidCodePoint && start + ch.length == end && ch.cls != CharClass::kSpace;
}

// A cut just before text[i]: ASCII whitespace right after a character that is not whitespace.
bool safe_cut_at(std::string_view text, size_t i) {
    if (i < 1 || i >= text.size()) return false;
    const char c = text[i];
    return (c == ' ' || (c >= '\t' && c <= '\r')) && ends_with_non_space(text, i);
}

}  // namespace

size_t last_safe_cut(std::string_view text) {
    for (size_t i = text.size(); i-- > 1;)
        if (safe_cut_at(text, i)) return i;
    return std::string_view::npos;
}

size_t first_safe_cut_after(std::string_view text, size_t from) {
    for (size_t i = from; i < text.size(); ++i)
        if (safe_cut_at(text, i)) return i;
    return text.size();
}

DocumentReader::DocumentReader(std::vector<InputFile> files, size_t piece_bytes)
    : files_(std::move(files)), piece_bytes_(std::max<size_t>(piece_bytes, 16)) {}

bool DocumentReader::open_next_file() {
    in_.close();
    in_.clear();
    file_open_ = false;
    if (file_index_ >= files_.size()) return false;
    const InputFile& f = files_[file_index_++];
    in_.open(f.path, std::ios::binary);
    if (!in_) throw IOError(fmt::format("data prepare: cannot open the input \"{}\"", f.path));
    file_open_ = true;
    file_eof_ = false;
    at_document_start_ = true;
    carry_.clear();
    carry_offset_ = 0;
    line_ = 0;
    return true;
}

bool DocumentReader::next(TextPiece& piece) {
    for (;;) {
        if (!pending_.empty()) {
            piece = std::move(pending_.front());
            pending_.pop_front();
            return true;
        }
        if (!file_open_ && !open_next_file()) return false;
        if (files_[file_index_ - 1].jsonl) read_jsonl_line();
        else if (next_plain(piece)) return true;
    }
}

void DocumentReader::read_more(size_t bytes) {
    const size_t old = carry_.size();
    carry_.resize(old + bytes);
    in_.read(carry_.data() + old, static_cast<std::streamsize>(bytes));
    carry_.resize(old + static_cast<size_t>(in_.gcount()));
    if (in_.bad()) throw IOError(fmt::format("data prepare: cannot read the input \"{}\"", files_[file_index_ - 1].path));
    if (in_.eof()) file_eof_ = true;
}

// A plain file: up to piece_bytes read, cut at the last safe place (more is read while there is
// none); the rest of the file once it is all read. An empty file is one empty document.
bool DocumentReader::next_plain(TextPiece& piece) {
    if (!file_eof_ && carry_.size() < piece_bytes_) read_more(piece_bytes_ - carry_.size());
    size_t cut = file_eof_ ? carry_.size() : last_safe_cut(carry_);
    while (cut == std::string::npos) {
        read_more(piece_bytes_);
        cut = file_eof_ ? carry_.size() : last_safe_cut(carry_);
    }
    if (cut == 0 && !at_document_start_) {   // nothing left of a document already started
        file_open_ = false;
        return false;
    }
    piece.text.assign(carry_, 0, cut);
    carry_.erase(0, cut);
    piece.starts_document = at_document_start_;
    piece.input_bytes = static_cast<int64_t>(cut);
    piece.file = &files_[file_index_ - 1];
    piece.line = 0;
    piece.offset = carry_offset_;
    carry_offset_ += static_cast<int64_t>(cut);
    if (at_document_start_) ++documents_;
    at_document_start_ = false;
    if (file_eof_ && carry_.empty()) file_open_ = false;
    return true;
}

// A .jsonl file: the next line's "text", split into pieces, into pending_ (a blank line: one empty
// piece that starts no document, for the progress count).
void DocumentReader::read_jsonl_line() {
    const InputFile& f = files_[file_index_ - 1];
    std::string line;
    if (!std::getline(in_, line)) {
        if (in_.bad()) throw IOError(fmt::format("data prepare: cannot read the input \"{}\"", f.path));
        file_open_ = false;
        return;
    }
    ++line_;
    const int64_t line_bytes = static_cast<int64_t>(line.size()) + (in_.eof() ? 0 : 1);
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
        pending_.push_back(TextPiece{"", false, line_bytes, &f, line_, 0});
        return;
    }
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
        throw FormatError(fmt::format("data prepare: {}: line {}: not valid JSON ({})", f.path, line_, e.what()));
    }
    if (!doc.is_object() || !doc.contains("text"))
        throw FormatError(fmt::format("data prepare: {}: line {}: expected a JSON object with a \"text\" field, got {}",
                                      f.path, line_, doc.is_object() ? "an object without one" : std::string(doc.type_name())));
    const nlohmann::json& text = doc.at("text");
    if (!text.is_string())
        throw FormatError(fmt::format("data prepare: {}: line {}: the \"text\" field is {} {}, not a string", f.path, line_,
                                      text.is_array() || text.is_object() ? "an" : "a", text.type_name()));
    split_document(text.get<std::string>(), line_bytes);
}

// One jsonl document's text as pieces of about piece_bytes, cut at safe places (past piece_bytes
// when there is none before).
void DocumentReader::split_document(std::string text, int64_t input_bytes) {
    const InputFile* f = &files_[file_index_ - 1];
    ++documents_;
    std::string_view rest = text;
    int64_t offset = 0;
    for (bool first = true; first || !rest.empty(); first = false) {
        size_t cut = rest.size();
        if (rest.size() > piece_bytes_) {
            cut = last_safe_cut(rest.substr(0, piece_bytes_ + 1));
            if (cut == std::string_view::npos) cut = first_safe_cut_after(rest, piece_bytes_);
        }
        pending_.push_back(TextPiece{std::string(rest.substr(0, cut)), first, first ? input_bytes : 0, f, line_, offset});
        rest.remove_prefix(cut);
        offset += static_cast<int64_t>(cut);
    }
}

}  // namespace ampgrad::data
