#include <algorithm>
#include <cctype>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace strutil {

inline bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

std::string_view trim_left(std::string_view s) {
    auto it = std::find_if_not(s.begin(), s.end(), is_space);
    return s.substr(static_cast<std::size_t>(it - s.begin()));
}

std::string_view trim_right(std::string_view s) {
    auto it = std::find_if_not(s.rbegin(), s.rend(), is_space);
    return s.substr(0, static_cast<std::size_t>(s.rend() - it));
}

std::string_view trim(std::string_view s) {
    return trim_right(trim_left(s));
}

std::vector<std::string> split(std::string_view s, char delim, bool skip_empty = false) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= s.size()) {
        std::size_t end = s.find(delim, start);
        if (end == std::string_view::npos) {
            end = s.size();
        }
        std::string_view piece = s.substr(start, end - start);
        if (!skip_empty || !piece.empty()) {
            parts.emplace_back(piece);
        }
        start = end + 1;
    }
    return parts;
}

std::vector<std::string> split(std::string_view s, std::string_view delim) {
    std::vector<std::string> parts;
    if (delim.empty()) {
        parts.emplace_back(s);
        return parts;
    }
    std::size_t start = 0;
    std::size_t pos;
    while ((pos = s.find(delim, start)) != std::string_view::npos) {
        parts.emplace_back(s.substr(start, pos - start));
        start = pos + delim.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
}

template <typename Container>
std::string join(const Container& items, std::string_view sep) {
    std::ostringstream out;
    bool first = true;
    for (const auto& item : items) {
        if (!first) {
            out << sep;
        }
        out << item;
        first = false;
    }
    return out.str();
}

template <typename Container, typename Transform>
std::string join(const Container& items, std::string_view sep, Transform fn) {
    std::ostringstream out;
    auto it = std::begin(items);
    auto end = std::end(items);
    if (it != end) {
        out << fn(*it);
        ++it;
    }
    for (; it != end; ++it) {
        out << sep << fn(*it);
    }
    return out.str();
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
    if (from.empty()) {
        return s;
    }
    std::size_t pos = 0;
    while ((pos = s.find(from, pos)) != std::string::npos) {
        s.replace(pos, from.size(), to);
        pos += to.size();
    }
    return s;
}

std::string to_lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string to_upper(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename T>
std::string to_string_padded(const T& value, std::size_t width, char fill = ' ') {
    std::ostringstream out;
    out << value;
    std::string text = out.str();
    if (text.size() < width) {
        text.insert(0, width - text.size(), fill);
    }
    return text;
}

}  // namespace strutil

int main() {
    const std::string csv = "  alpha, beta,,gamma ,  delta  ";
    auto fields = strutil::split(csv, ',');
    std::vector<std::string> cleaned;
    for (const auto& field : fields) {
        auto t = strutil::trim(field);
        if (!t.empty()) {
            cleaned.emplace_back(t);
        }
    }

    std::cout << "[" << strutil::join(cleaned, "|") << "]\n";
    std::cout << strutil::join(cleaned, ", ", [](const std::string& s) { return strutil::to_upper(s); })
              << "\n";
    std::cout << strutil::replace_all("a-b-c-d", "-", "::") << "\n";
    std::cout << std::boolalpha << strutil::starts_with("prefix_value", "prefix") << " "
              << strutil::ends_with("archive.tar.gz", ".zip") << "\n";

    std::vector<int> numbers{1, 22, 333};
    std::cout << strutil::join(numbers, " ", [](int n) { return strutil::to_string_padded(n, 5, '0'); })
              << "\n";
    for (const auto& part : strutil::split("key=>value=>extra", "=>")) {
        std::cout << "part: " << part << "\n";
    }
    return 0;
}
