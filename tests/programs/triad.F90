! A triad in Fortran for `memlens fc`: 24 bytes read and 24 written per element
! over the whole program (initialisation 16 written, triad 16 read + 8 written,
! the final sum 8 read), plus what the runtime's I/O setup touches in main (the
! same for every n: the printed mean does not depend on n).
program triad
  implicit none
  integer, parameter :: n = N
  real(8), allocatable :: a(:), b(:), c(:)
  integer :: i
  allocate(a(n), b(n), c(n))
  b = 2.0d0
  c = 1.0d0
  do i = 1, n
    a(i) = b(i) + 3.0d0 * c(i)
  end do
  print *, sum(a) / n
end program
