def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number."""
    

if __name__ == "__main__":
    print([fibonacci(i) for i in range(10)])
