//! The MPI library of the job's own launcher, loaded when `memlens report
//! --reduce` runs under mpirun: memlens is built against no MPI, and runs as
//! an MPI program with whichever the site has. Two ABIs cover the common
//! implementations: Open MPI's (handles are pointers to its predefined
//! objects, found by symbol) and MPICH's (integer handles fixed by its ABI;
//! also Intel MPI, MVAPICH and Cray MPICH). Hand-written: the MPI crates
//! bind one implementation at build time, through its headers.

use anyhow::{bail, Context, Result};
use std::ffi::{c_int, c_void};

/// Each launcher's variable giving every process the job's size, and the
/// libraries of its MPI: Open MPI's mpirun; MPICH's Hydra (also Intel MPI's,
/// MVAPICH's).
const LAUNCHERS: [(&str, &[&str]); 2] = [
    ("OMPI_COMM_WORLD_SIZE", &["libmpi.so.40"]),
    ("PMI_SIZE", &["libmpi.so.12", "libmpich.so.12"]),
];

/// The launcher this process runs under, if one is known.
fn launcher() -> Option<&'static (&'static str, &'static [&'static str])> {
    LAUNCHERS
        .iter()
        .find(|(var, _)| std::env::var_os(var).is_some())
}

/// The library names to try, in order: the launcher's own MPI first, for a
/// machine with both (Debian installs Open MPI and MPICH side by side; Open
/// MPI's library under MPICH's mpirun initialises a job of one).
fn libraries() -> Vec<&'static str> {
    let first: &[&str] = launcher().map_or(&[], |l| l.1);
    let others = (LAUNCHERS.iter().flat_map(|l| l.1)).filter(|name| !first.contains(name));
    (first.iter().chain(others).chain(&["libmpi.so"]))
        .copied()
        .collect()
}

/// The job's size the launcher announced, if it did.
fn launched_size() -> Option<usize> {
    std::env::var(launcher()?.0).ok()?.parse().ok()
}

/// MPICH's predefined handles (mpi.h of MPICH 3 and 4).
const MPICH_COMM_WORLD: c_int = 0x4400_0000;
const MPICH_BYTE: c_int = 0x4c00_010d;
const MPICH_INT: c_int = 0x4c00_0405;

/// The calls memlens makes, for handles of type `H`.
struct Api<H> {
    comm_world: H,
    byte: H,
    int: H,
    comm_rank: unsafe extern "C" fn(H, *mut c_int) -> c_int,
    comm_size: unsafe extern "C" fn(H, *mut c_int) -> c_int,
    #[allow(clippy::type_complexity)]
    gather: unsafe extern "C" fn(*const c_void, c_int, H, *mut c_void, c_int, H, c_int, H) -> c_int,
    #[allow(clippy::type_complexity)]
    gatherv: unsafe extern "C" fn(
        *const c_void,
        c_int,
        H,
        *mut c_void,
        *const c_int,
        *const c_int,
        H,
        c_int,
        H,
    ) -> c_int,
    finalize: unsafe extern "C" fn() -> c_int,
}

enum Flavor {
    OpenMpi(Api<*const c_void>),
    Mpich(Api<c_int>),
}

/// MPI, initialised; finalised when dropped.
pub struct Mpi {
    flavor: Flavor,
    pub rank: usize,
    pub size: usize,
    /// Kept loaded while its functions may be called.
    _library: libloading::Library,
}

impl Mpi {
    /// Loads the MPI library and initialises it.
    pub fn init() -> Result<Mpi> {
        let (library, name) = libraries()
            .into_iter()
            .find_map(|name| {
                // Global: Open MPI's components, loaded by MPI_Init, resolve
                // their symbols against it.
                // SAFETY: loading a shared library runs its constructors,
                // which MPI libraries expect of every program they serve.
                let lib = unsafe {
                    libloading::os::unix::Library::open(
                        Some(name),
                        libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
                    )
                };
                lib.ok().map(|l| (libloading::Library::from(l), name))
            })
            .context("--reduce runs under mpirun and loads the MPI library (libmpi.so.40 of Open MPI or libmpi.so.12 of MPICH): none was found; install the MPI the job ran with, or drop --reduce")?;
        // SAFETY: the symbols are MPI's, with the signatures of the ABI
        // their library follows (Open MPI's exports ompi_mpi_comm_world).
        unsafe {
            let init: libloading::Symbol<unsafe extern "C" fn(*mut c_int, *mut c_void) -> c_int> =
                library.get(b"MPI_Init\0")?;
            if init(std::ptr::null_mut(), std::ptr::null_mut()) != 0 {
                bail!("MPI_Init of {name} failed");
            }
            let flavor = match library.get::<*const c_void>(b"ompi_mpi_comm_world\0") {
                Ok(world) => Flavor::OpenMpi(Api {
                    comm_world: *world,
                    byte: *library.get::<*const c_void>(b"ompi_mpi_byte\0")?,
                    int: *library.get::<*const c_void>(b"ompi_mpi_int\0")?,
                    comm_rank: *library.get(b"MPI_Comm_rank\0")?,
                    comm_size: *library.get(b"MPI_Comm_size\0")?,
                    gather: *library.get(b"MPI_Gather\0")?,
                    gatherv: *library.get(b"MPI_Gatherv\0")?,
                    finalize: *library.get(b"MPI_Finalize\0")?,
                }),
                Err(_) => Flavor::Mpich(Api {
                    comm_world: MPICH_COMM_WORLD,
                    byte: MPICH_BYTE,
                    int: MPICH_INT,
                    comm_rank: *library.get(b"MPI_Comm_rank\0")?,
                    comm_size: *library.get(b"MPI_Comm_size\0")?,
                    gather: *library.get(b"MPI_Gather\0")?,
                    gatherv: *library.get(b"MPI_Gatherv\0")?,
                    finalize: *library.get(b"MPI_Finalize\0")?,
                }),
            };
            let (mut rank, mut size) = (0, 0);
            match &flavor {
                Flavor::OpenMpi(api) => {
                    (api.comm_rank)(api.comm_world, &mut rank);
                    (api.comm_size)(api.comm_world, &mut size);
                }
                Flavor::Mpich(api) => {
                    (api.comm_rank)(api.comm_world, &mut rank);
                    (api.comm_size)(api.comm_world, &mut size);
                }
            }
            let mpi = Mpi {
                flavor,
                rank: rank.max(0) as usize,
                size: size.max(1) as usize,
                _library: library,
            };
            // Returned as an error, `mpi` is dropped: MPI finalised.
            if let Some(launched) = launched_size().filter(|&n| n > mpi.size) {
                bail!("{name} sees a job of {size} process(es) where the launcher started {launched}: it is not the MPI of this mpirun; run the mpirun of the MPI whose library memlens found, or put the launcher's library first on LD_LIBRARY_PATH");
            }
            Ok(mpi)
        }
    }

    /// Every process's `mine`, in rank order, on rank 0; `None` elsewhere.
    pub fn gather(&self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        match &self.flavor {
            Flavor::OpenMpi(api) => gather(api, self.rank, self.size, mine),
            Flavor::Mpich(api) => gather(api, self.rank, self.size, mine),
        }
    }
}

fn gather<H: Copy>(
    api: &Api<H>,
    rank: usize,
    size: usize,
    mine: &[u8],
) -> Result<Option<Vec<Vec<u8>>>> {
    let len = c_int::try_from(mine.len())
        .context("--reduce: over 2 GiB of aggregates from one process")?;
    let mut lens = vec![0 as c_int; if rank == 0 { size } else { 0 }];
    // SAFETY: buffers of the sizes MPI is told, on every process of the
    // communicator (the receive buffers matter on the root only).
    unsafe {
        if (api.gather)(
            &len as *const c_int as *const c_void,
            1,
            api.int,
            lens.as_mut_ptr() as *mut c_void,
            1,
            api.int,
            0,
            api.comm_world,
        ) != 0
        {
            bail!("MPI_Gather failed");
        }
        let mut displs = Vec::with_capacity(lens.len());
        let mut total: usize = 0;
        for &l in &lens {
            displs
                .push(c_int::try_from(total).context("--reduce: over 2 GiB of aggregates in all")?);
            total += l.max(0) as usize;
        }
        let mut all = vec![0u8; total];
        if (api.gatherv)(
            mine.as_ptr() as *const c_void,
            len,
            api.byte,
            all.as_mut_ptr() as *mut c_void,
            lens.as_ptr(),
            displs.as_ptr(),
            api.byte,
            0,
            api.comm_world,
        ) != 0
        {
            bail!("MPI_Gatherv failed");
        }
        if rank != 0 {
            return Ok(None);
        }
        Ok(Some(
            (lens.iter().zip(&displs))
                .map(|(&l, &at)| all[at as usize..at as usize + l.max(0) as usize].to_vec())
                .collect(),
        ))
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        // SAFETY: MPI was initialised by `init`, and is finalised once.
        unsafe {
            match &self.flavor {
                Flavor::OpenMpi(api) => (api.finalize)(),
                Flavor::Mpich(api) => (api.finalize)(),
            };
        }
    }
}
