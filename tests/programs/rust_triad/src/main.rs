fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let b = vec![2.0f64; n];
    let c = vec![1.0f64; n];
    let mut a = vec![0.0f64; n];
    for i in 0..n {
        a[i] = b[i] + 3.0 * c[i];
    }
    println!("{}", a.iter().sum::<f64>() / n as f64);
}
