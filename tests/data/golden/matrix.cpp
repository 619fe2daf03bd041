#include <cstddef>
#include <stdexcept>
#include <vector>

namespace linalg {

// A dense row-major matrix of doubles.
class Matrix {
public:
    Matrix(std::size_t rows, std::size_t cols) : rows_(rows), cols_(cols), data_(rows * cols) {}

    double& at(std::size_t r, std::size_t c) {
        if (r >= rows_ || c >= cols_) throw std::out_of_range("Matrix::at");
        return data_[r * cols_ + c];
    }

    double at(std::size_t r, std::size_t c) const {
        if (r >= rows_ || c >= cols_) throw std::out_of_range("Matrix::at");
        return data_[r * cols_ + c];
    }

    Matrix operator*(const Matrix& other) const {
        if (cols_ != other.rows_) throw std::invalid_argument("shape mismatch");
        Matrix out(rows_, other.cols_);
        for (std::size_t i = 0; i < rows_; ++i)
            for (std::size_t k = 0; k < cols_; ++k)
                for (std::size_t j = 0; j < other.cols_; ++j)
                    out.data_[i * other.cols_ + j] += at(i, k) * other.at(k, j);
        return out;
    }

    std::size_t rows() const { return rows_; }
    std::size_t cols() const { return cols_; }

private:
    std::size_t rows_, cols_;
    std::vector<double> data_;
};

Matrix identity(std::size_t n) {
    Matrix m(n, n);
    for (std::size_t i = 0; i < n; ++i) m.at(i, i) = 1.0;
    return m;
}

}  // namespace linalg
