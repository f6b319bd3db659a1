// memlens' LLVM pass plugin, hand-written (no library counts accesses per
// block or instruments atomics alone). `memlens cc` builds it once per LLVM
// version against llvm-N-dev's headers and loads it with -fpass-plugin; it
// runs at the end of the optimization pipeline (where sancov would), so what
// it counts is what the optimized program executes.
//
// 1. Atomic read-modify-writes (atomicrmw, cmpxchg) call the runtime's
//    `memlens_atomic(address, bytes)` first: sancov traces loads and stores
//    but not these.
// 2. On x86-64, loads and stores are counted per stretch of a basic block
//    between calls, not one callback per access (Examem's compile-time
//    counting): the pass sums each stretch's accesses by class (load/store x
//    1, 2, 4, 8, 16 bytes) and subtracts each sum from that class's
//    thread-local countdown once. Only a subtraction that borrows takes the
//    slow path, which hands the runtime the stretch's addresses and code
//    addresses of that class: the runtime samples exactly the accesses a
//    countdown per access would have (the one at which it borrows, and every
//    period after), so sampling stays as unbiased as before. A stretch ends
//    at every call, so counts are current whenever the runtime is entered
//    (region marks, exit). Other targets keep sancov's callbacks.
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/ModRef.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

#include <optional>

using namespace llvm;

namespace {

// The runtime's class order: loads then stores, 1 to 16 bytes.
constexpr unsigned SIZES = 5;
constexpr unsigned CLASSES = 2 * SIZES;
// Accesses of one class handed to the slow path at most: a longer stretch is
// counted in pieces of this many.
constexpr unsigned MOST_PER_CHECK = 64;

struct CountAtomics : PassInfoMixin<CountAtomics> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    SmallVector<Instruction *, 16> atomics;
    for (Function &function : module)
      for (BasicBlock &block : function)
        for (Instruction &inst : block)
          if (isa<AtomicRMWInst>(inst) || isa<AtomicCmpXchgInst>(inst))
            atomics.push_back(&inst);
    if (atomics.empty())
      return PreservedAnalyses::all();
    LLVMContext &context = module.getContext();
    FunctionCallee hook = module.getOrInsertFunction(
        "memlens_atomic", Type::getVoidTy(context),
        PointerType::getUnqual(context), Type::getInt32Ty(context));
    const DataLayout &layout = module.getDataLayout();
    for (Instruction *inst : atomics) {
      Value *address;
      Type *type;
      if (auto *rmw = dyn_cast<AtomicRMWInst>(inst)) {
        address = rmw->getPointerOperand();
        type = rmw->getValOperand()->getType();
      } else {
        auto *cmpxchg = cast<AtomicCmpXchgInst>(inst);
        address = cmpxchg->getPointerOperand();
        type = cmpxchg->getNewValOperand()->getType();
      }
      // The builder takes the instruction's debug location for the call.
      IRBuilder<> builder(inst);
      builder.CreateCall(hook, {address, builder.getInt32(layout.getTypeStoreSize(type))});
    }
    return PreservedAnalyses::none();
  }
};

// One access as the runtime counts it: its class, address and instruction
// (whose line the sample's code address takes).
struct Access {
  unsigned klass;
  Value *address;
  Instruction *inst;
};

// A stretch of a block between calls: its accesses, and where the counting
// goes (before the call or the terminator that ends it).
struct Stretch {
  SmallVector<Access, 8> accesses;
  Instruction *end;
};

// Calls that neither enter the runtime nor touch program memory the pass
// would miss: a stretch runs on through them.
bool passes_through(const Instruction &inst) {
  if (isa<DbgInfoIntrinsic>(inst))
    return true;
  if (auto *intrinsic = dyn_cast<IntrinsicInst>(&inst)) {
    switch (intrinsic->getIntrinsicID()) {
    case Intrinsic::lifetime_start:
    case Intrinsic::lifetime_end:
    case Intrinsic::assume:
    case Intrinsic::experimental_noalias_scope_decl:
    case Intrinsic::prefetch:
      return true;
    default:
      return false;
    }
  }
  return false;
}

// A load or store split into the runtime's classes: the greatest size
// first (a 32-byte vector is two 16-byte accesses, a 12-byte one 8 + 4).
void add_access(SmallVectorImpl<Access> &out, Instruction *inst, Value *address, Type *type,
                bool store, const DataLayout &layout) {
  uint64_t bytes = layout.getTypeStoreSize(type).getKnownMinValue();
  for (int size = SIZES - 1; size >= 0 && bytes > 0; --size) {
    uint64_t each = uint64_t(1) << size;
    for (; bytes >= each; bytes -= each)
      out.push_back({(store ? SIZES : 0) + unsigned(size), address, inst});
  }
}

bool instrumented(const Function &function) {
  if (function.isDeclaration() || function.hasFnAttribute(Attribute::NoSanitizeCoverage) ||
      function.hasFnAttribute(Attribute::DisableSanitizerInstrumentation) ||
      function.hasFnAttribute(Attribute::Naked))
    return false;
  StringRef name = function.getName();
  return !name.startswith("memlens_") && !name.startswith("__sanitizer_") &&
         !name.contains(".module_ctor");
}

// Where the slow path hands over a check's addresses and code addresses.
struct Arrays {
  ArrayType *type;
  Value *addresses;
  Value *code;
};

// What the counting code refers to, declared once per module at its first
// count: the countdown array, the slow path, the countdown's TBAA tag.
struct Runtime {
  GlobalVariable *countdowns;
  FunctionCallee refill;
  MDNode *tbaa;
  // `lea 0(%rip)`: the code address where it is placed (an access's own).
  InlineAsm *here;
};

struct CountBlocks : PassInfoMixin<CountBlocks> {
  std::optional<Runtime> runtime;

  const Runtime &runtime_of(Module &module) {
    if (runtime)
      return *runtime;
    LLVMContext &context = module.getContext();
    Type *i64 = Type::getInt64Ty(context);
    Type *ptr = PointerType::getUnqual(context);
    auto *countdowns_type = ArrayType::get(i64, CLASSES);
    auto *countdowns = cast<GlobalVariable>(
        module.getOrInsertGlobal("memlens_countdown", countdowns_type, [&] {
          return new GlobalVariable(module, countdowns_type, false, GlobalValue::ExternalLinkage,
                                    nullptr, "memlens_countdown", nullptr,
                                    GlobalValue::InitialExecTLSModel);
        }));
    // The refill reads the two arrays and nothing else of the program's: the
    // countdown goes as an integer, so that no program access aliases it and
    // it may stay in a register across a loop.
    FunctionCallee refill = module.getOrInsertFunction(
        "memlens_access_refill_block",
        FunctionType::get(i64, {ptr, ptr, i64, i64, Type::getInt32Ty(context), i64}, false));
    if (auto *declared = dyn_cast<Function>(refill.getCallee())) {
      declared->setDoesNotThrow();
      declared->setMemoryEffects(MemoryEffects::argMemOnly(ModRefInfo::Ref) |
                                 MemoryEffects::inaccessibleMemOnly());
    }
    MDBuilder metadata(context);
    // The countdown's own TBAA type: no typed access of the program aliases it.
    MDNode *root = metadata.createTBAARoot("Simple C/C++ TBAA");
    MDNode *type = metadata.createTBAAScalarTypeNode(
        "memlens countdown", metadata.createTBAAScalarTypeNode("omnipotent char", root));
    auto *here = InlineAsm::get(FunctionType::get(ptr, false), "lea 0(%rip), $0", "=r",
                                /*hasSideEffects=*/true);
    runtime = Runtime{countdowns, refill, metadata.createTBAAStructTagNode(type, type, 0), here};
    return *runtime;
  }

  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    if (!StringRef(module.getTargetTriple()).startswith("x86_64"))
      return PreservedAnalyses::all();
    runtime.reset();
    const DataLayout &layout = module.getDataLayout();
    bool changed = false;
    for (Function &function : module) {
      if (!instrumented(function))
        continue;
      SmallVector<Stretch, 16> stretches;
      for (BasicBlock &block : function) {
        Stretch current;
        for (Instruction &inst : block) {
          if (auto *load = dyn_cast<LoadInst>(&inst)) {
            add_access(current.accesses, load, load->getPointerOperand(), load->getType(), false,
                       layout);
          } else if (auto *store = dyn_cast<StoreInst>(&inst)) {
            add_access(current.accesses, store, store->getPointerOperand(),
                       store->getValueOperand()->getType(), true, layout);
          } else if ((isa<CallBase>(inst) && !passes_through(inst)) || inst.isTerminator()) {
            current.end = &inst;
            if (!current.accesses.empty())
              stretches.push_back(std::move(current));
            current = Stretch();
          }
        }
      }
      if (stretches.empty())
        continue;
      // The slow path's two arrays, in the frame once, as long as the most
      // accesses of one class a check hands over.
      size_t most = 0;
      for (const Stretch &stretch : stretches) {
        unsigned per_class[CLASSES] = {};
        for (const Access &access : stretch.accesses)
          most = std::max<size_t>(most, ++per_class[access.klass]);
      }
      most = std::min<size_t>(most, MOST_PER_CHECK);
      IRBuilder<> entry(&*function.getEntryBlock().getFirstInsertionPt());
      Type *ptr = PointerType::getUnqual(module.getContext());
      Arrays arrays{ArrayType::get(ptr, most), nullptr, nullptr};
      arrays.addresses = entry.CreateAlloca(arrays.type);
      arrays.code = entry.CreateAlloca(arrays.type);
      for (Stretch &stretch : stretches)
        count(module, stretch, arrays);
      changed = true;
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }

  // Subtracts each class's accesses of the stretch from its countdown, the
  // slow path on a borrow.
  void count(Module &module, Stretch &stretch, const Arrays &arrays) {
    for (unsigned klass = 0; klass < CLASSES; ++klass) {
      SmallVector<Access, 8> of_class;
      for (const Access &access : stretch.accesses)
        if (access.klass == klass)
          of_class.push_back(access);
      for (size_t first = 0; first < of_class.size(); first += MOST_PER_CHECK) {
        size_t n = std::min<size_t>(MOST_PER_CHECK, of_class.size() - first);
        check(module, klass, ArrayRef<Access>(of_class).slice(first, n), stretch.end, arrays);
      }
    }
  }

  void check(Module &module, unsigned klass, ArrayRef<Access> accesses, Instruction *end,
             const Arrays &arrays) {
    LLVMContext &context = module.getContext();
    Type *i64 = Type::getInt64Ty(context);
    const Runtime &runtime = runtime_of(module);
    MDBuilder metadata(context);

    const uint64_t n = accesses.size();
    IRBuilder<> builder(end);
    builder.SetCurrentDebugLocation(accesses.back().inst->getDebugLoc());
    Value *slot = builder.CreateConstInBoundsGEP2_64(runtime.countdowns->getValueType(),
                                                     runtime.countdowns, 0, klass);
    LoadInst *left = builder.CreateLoad(i64, slot);
    left->setMetadata(LLVMContext::MD_tbaa, runtime.tbaa);
    Value *next = builder.CreateSub(left, builder.getInt64(n));
    Value *borrow = builder.CreateICmpULT(left, builder.getInt64(n));
    Instruction *slow_end = SplitBlockAndInsertIfThen(
        borrow, end, false, metadata.createBranchWeights(1, (1 << 20) - 1));
    BasicBlock *slow = slow_end->getParent();
    BasicBlock *tail = end->getParent();

    IRBuilder<> fill(slow_end);
    for (uint64_t k = 0; k < n; ++k) {
      // Each code address taken where its access's line is.
      fill.SetCurrentDebugLocation(accesses[k].inst->getDebugLoc());
      fill.CreateStore(accesses[k].address,
                       fill.CreateConstInBoundsGEP2_64(arrays.type, arrays.addresses, 0, k));
      CallInst *pc = fill.CreateCall(runtime.here);
      pc->setDoesNotAccessMemory();
      fill.CreateStore(pc, fill.CreateConstInBoundsGEP2_64(arrays.type, arrays.code, 0, k));
    }
    fill.SetCurrentDebugLocation(accesses.back().inst->getDebugLoc());
    Value *refilled = fill.CreateCall(
        runtime.refill, {arrays.addresses, arrays.code, fill.getInt64(n), left,
                         fill.getInt32(klass), fill.CreatePtrToInt(runtime.countdowns, i64)});

    IRBuilder<> join(&*tail->getFirstInsertionPt());
    join.SetCurrentDebugLocation(accesses.back().inst->getDebugLoc());
    PHINode *value = join.CreatePHI(i64, 2);
    value->addIncoming(next, left->getParent());
    value->addIncoming(refilled, slow);
    join.CreateStore(value, slot)->setMetadata(LLVMContext::MD_tbaa, runtime.tbaa);
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "memlens", "2", [](PassBuilder &builder) {
            builder.registerOptimizerLastEPCallback(
                [](ModulePassManager &passes, OptimizationLevel) {
                  passes.addPass(CountAtomics());
                  passes.addPass(CountBlocks());
                });
          }};
}
