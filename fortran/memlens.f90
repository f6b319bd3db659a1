! memlens annotations for Fortran. Build: gcc -c -I include fortran/memlens_f.c;
! gfortran -c fortran/memlens.f90; link both objects into the program.
!   use memlens
!   call memlens_region_begin("solve") ... call memlens_region_end("solve")
!   call memlens_tag("grid", grid, int(size(grid) * 8, c_size_t))
module memlens
  use iso_c_binding
  implicit none
  private
  public :: memlens_region_begin, memlens_region_end, memlens_tag, memlens_untag, &
            memlens_group_begin, memlens_group_end

  interface
    subroutine c_region_begin(name) bind(C, name="memlens_f_region_begin")
      import :: c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end subroutine
    subroutine c_region_end(name) bind(C, name="memlens_f_region_end")
      import :: c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end subroutine
    subroutine c_tag(name, start, len) bind(C, name="memlens_f_tag")
      import :: c_char, c_ptr, c_size_t
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr), value :: start
      integer(c_size_t), value :: len
    end subroutine
    subroutine c_untag(start) bind(C, name="memlens_f_untag")
      import :: c_ptr
      type(c_ptr), value :: start
    end subroutine
    subroutine c_group_begin(name) bind(C, name="memlens_f_group_begin")
      import :: c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end subroutine
    subroutine memlens_group_end() bind(C, name="memlens_f_group_end")
    end subroutine
  end interface

contains

  subroutine memlens_region_begin(name)
    character(len=*), intent(in) :: name
    call c_region_begin(trim(name) // c_null_char)
  end subroutine

  subroutine memlens_region_end(name)
    character(len=*), intent(in) :: name
    call c_region_end(trim(name) // c_null_char)
  end subroutine

  subroutine memlens_tag(name, start, len)
    character(len=*), intent(in) :: name
    type(*), dimension(..), target, intent(in) :: start
    integer(c_size_t), intent(in) :: len
    call c_tag(trim(name) // c_null_char, c_loc(start), len)
  end subroutine

  subroutine memlens_untag(start)
    type(*), dimension(..), target, intent(in) :: start
    call c_untag(c_loc(start))
  end subroutine

  subroutine memlens_group_begin(name)
    character(len=*), intent(in) :: name
    call c_group_begin(trim(name) // c_null_char)
  end subroutine
end module memlens
