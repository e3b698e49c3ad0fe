use std::fmt;
use std::ops::{Add, Index, IndexMut, Mul};

#[derive(Debug, Clone, PartialEq)]
pub enum MatrixError {
    DimensionMismatch { expected: (usize, usize), found: (usize, usize) },
    NotSquare(usize, usize),
}

impl fmt::Display for MatrixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatrixError::DimensionMismatch { expected, found } => write!(
                f,
                "dimension mismatch: expected {}x{}, found {}x{}",
                expected.0, expected.1, found.0, found.1
            ),
            MatrixError::NotSquare(r, c) => write!(f, "matrix is not square ({}x{})", r, c),
        }
    }
}

impl std::error::Error for MatrixError {}

#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Matrix {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix { rows, cols, data: vec![0.0; rows * cols] }
    }

    pub fn identity(n: usize) -> Self {
        let mut m = Matrix::zeros(n, n);
        for i in 0..n {
            m[(i, i)] = 1.0;
        }
        m
    }

    pub fn from_rows(rows: &[Vec<f64>]) -> Result<Self, MatrixError> {
        let cols = rows.first().map_or(0, |r| r.len());
        let mut data = Vec::with_capacity(rows.len() * cols);
        for row in rows {
            if row.len() != cols {
                return Err(MatrixError::DimensionMismatch {
                    expected: (rows.len(), cols),
                    found: (rows.len(), row.len()),
                });
            }
            data.extend_from_slice(row);
        }
        Ok(Matrix { rows: rows.len(), cols, data })
    }

    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub fn transpose(&self) -> Matrix {
        let mut out = Matrix::zeros(self.cols, self.rows);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out[(c, r)] = self[(r, c)];
            }
        }
        out
    }

    pub fn scale(&self, factor: f64) -> Matrix {
        Matrix {
            rows: self.rows,
            cols: self.cols,
            data: self.data.iter().map(|v| v * factor).collect(),
        }
    }

    pub fn try_mul(&self, other: &Matrix) -> Result<Matrix, MatrixError> {
        if self.cols != other.rows {
            return Err(MatrixError::DimensionMismatch {
                expected: (self.cols, other.cols),
                found: other.shape(),
            });
        }
        let mut out = Matrix::zeros(self.rows, other.cols);
        for i in 0..self.rows {
            for k in 0..self.cols {
                let a = self[(i, k)];
                for j in 0..other.cols {
                    out[(i, j)] += a * other[(k, j)];
                }
            }
        }
        Ok(out)
    }

    /// Determinant via Gaussian elimination with partial pivoting.
    pub fn determinant(&self) -> Result<f64, MatrixError> {
        if self.rows != self.cols {
            return Err(MatrixError::NotSquare(self.rows, self.cols));
        }
        let n = self.rows;
        let mut m = self.clone();
        let mut det = 1.0;
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&a, &b| m[(a, col)].abs().partial_cmp(&m[(b, col)].abs()).unwrap())
                .unwrap();
            if m[(pivot, col)].abs() < 1e-12 {
                return Ok(0.0);
            }
            if pivot != col {
                m.swap_rows(pivot, col);
                det = -det;
            }
            det *= m[(col, col)];
            for row in (col + 1)..n {
                let factor = m[(row, col)] / m[(col, col)];
                for k in col..n {
                    let value = m[(col, k)];
                    m[(row, k)] -= factor * value;
                }
            }
        }
        Ok(det)
    }

    fn swap_rows(&mut self, a: usize, b: usize) {
        for c in 0..self.cols {
            self.data.swap(a * self.cols + c, b * self.cols + c);
        }
    }

    fn elementwise(&self, other: &Matrix, op: impl Fn(f64, f64) -> f64) -> Matrix {
        assert_eq!(self.shape(), other.shape(), "matrix shapes must match");
        let data = self.data.iter().zip(&other.data).map(|(a, b)| op(*a, *b)).collect();
        Matrix { rows: self.rows, cols: self.cols, data }
    }
}

impl Index<(usize, usize)> for Matrix {
    type Output = f64;

    fn index(&self, (r, c): (usize, usize)) -> &f64 {
        &self.data[r * self.cols + c]
    }
}

impl IndexMut<(usize, usize)> for Matrix {
    fn index_mut(&mut self, (r, c): (usize, usize)) -> &mut f64 {
        &mut self.data[r * self.cols + c]
    }
}

impl<'a> Add<&'a Matrix> for &'a Matrix {
    type Output = Matrix;

    fn add(self, rhs: &'a Matrix) -> Matrix {
        self.elementwise(rhs, |a, b| a + b)
    }
}

impl<'a> Mul<&'a Matrix> for &'a Matrix {
    type Output = Matrix;

    fn mul(self, rhs: &'a Matrix) -> Matrix {
        self.try_mul(rhs).expect("incompatible matrix dimensions")
    }
}

impl fmt::Display for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let precision = f.precision().unwrap_or(2);
        for r in 0..self.rows {
            write!(f, "[")?;
            for c in 0..self.cols {
                if c > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{:>8.*}", precision, self[(r, c)])?;
            }
            writeln!(f, "]")?;
        }
        Ok(())
    }
}

fn main() -> Result<(), MatrixError> {
    let a = Matrix::from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0]])?;
    let b = Matrix::identity(2).scale(2.0);
    println!("a + b =\n{}", &a + &b);
    println!("a * b =\n{}", &a * &b);
    println!("det(a) = {}", a.determinant()?);
    Ok(())
}
