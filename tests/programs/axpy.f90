! Fortran arrays filled, updated (y = y + 3x) and summed: 3 000 000 loads and
! 3 000 000 stores of 8 bytes in the program's own code, whatever compiler.
program axpy
  implicit none
  integer, parameter :: n = 1000000
  real(8), allocatable :: x(:), y(:)
  integer :: i
  allocate(x(n), y(n))
  do i = 1, n
    x(i) = i
    y(i) = 2*i
  end do
  do i = 1, n
    y(i) = y(i) + 3.0d0 * x(i)
  end do
  print *, sum(y)
end program
